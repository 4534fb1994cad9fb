# s14c = session 13's prepared s14r2 and s14r1 (the tests are in s14a/s14b): issue 22's grammar-constrained
# decoding at concurrency 64 (plain vs a json_schema response_format, interleaved twice), then issue 25's
# long-prompt ladder rows for the new families beside Llama-3.1-8B. Synthetic weights, Llama 3.1 tokenizer.
# Predictions (s14r1.sh, s14r2.sh in ../2026-12-02-h200-s13): schema ITL +2-5%; gpt-oss-20b decode ~1.1x
# Llama's; Qwen3.5 decode after 32k ~0.8x after 512; Qwen3.5 prefill at 8192 well under 0.6x a dense model.
set -u
gunzip -kf .gpu/mlxcel.gz; chmod +x .gpu/mlxcel
export MLXCEL_CUDA_CACHE=/tmp/kc
TOK="--tokenizer .gpu/tokenizers/llama3_1"; SC=benchmarks/2026-12-02-h200-s13/ints_schema.json
S=$(date +%s)
.gpu/mlxcel serve --profile llama-3.1-8b-4bit --backend cuda --parallel 0 --ctx-size 4608 --port 18080 $TOK > $OUT/serve.log 2>&1 &
spid=$!
for _ in $(seq 1 90); do curl -sf http://127.0.0.1:18080/health >/dev/null 2>&1 && break; sleep 1; done
for r in 1 2; do for mode in plain schema; do
  fmt=""; [ $mode = schema ] && fmt="--response-format @$SC"
  timeout 60 .gpu/mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 64 --requests 128 --prompt-tokens 512 --max-tokens 256 \
    --ignore-eos=false $fmt --quiet $TOK --out $OUT/sv_${mode}_$r.csv > $OUT/sv_${mode}_$r.log 2>&1; echo "$mode $r rc=$? $(( $(date +%s)-S )) s"
done; done
kill $spid; wait $spid 2>/dev/null
cat $OUT/sv_*.csv > $OUT/serve_schema.csv; rm -f $OUT/sv_*.csv
timeout $(( 560 - ($(date +%s)-S) )) .gpu/mlxcel bench ladder --backend cuda --profiles llama-3.1-8b-4bit,gpt-oss-20b-mxfp4-q8,qwen3.5-35b-a3b-4bit,qwen3.5-27b-4bit,gemma-4-26b-a4b-it-4bit,gemma-4-e4b-it-4bit \
  --lengths 512,8192,32768 --max-tokens 64 $TOK --out $OUT > $OUT/ladder.log 2>&1; echo "ladder rc=$? $(( $(date +%s)-S )) s"
ls $OUT; tail -30 $OUT/ladder.log
echo "== serve"; grep -v '^#' $OUT/serve_schema.csv | head -12
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
