# NOT RUN (prepared in session 13): issue 22's "< 10% decode slowdown at batch 64" under grammar-constrained
# decoding. The same serving load at concurrency 64 (512-token prompts, up to 256 output tokens) with and without
# a json_schema response_format (an array of 100-120 integers: ~250 tokens, so the grammar ends the answer near
# max_tokens), interleaved twice; the figure is the ITL mean and the per-request decode rate, not the output
# tok/s (answers may end early under the schema). Synthetic Llama-3.1-8B 4-bit weights, Llama 3.1 tokenizer.
# Prediction: ITL +2-5% (13 us of mask work a token on the host, in the parallel sampling jobs, against ~10 ms
# steps), inside the 10%.
set -u
gunzip -kf .gpu/mlxcel.gz; chmod +x .gpu/mlxcel
TOK="--tokenizer .gpu/tokenizers/llama3_1"; S=benchmarks/2026-12-02-h200-s13/ints_schema.json
.gpu/mlxcel serve --profile llama-3.1-8b-4bit --backend cuda --parallel 0 --ctx-size 4608 --port 18080 $TOK > $OUT/serve.log 2>&1 &
spid=$!
for _ in $(seq 1 60); do curl -sf http://127.0.0.1:18080/health >/dev/null 2>&1 && break; sleep 1; done
for r in 1 2; do for mode in plain schema; do
  fmt=""; [ $mode = schema ] && fmt="--response-format @$S"
  timeout 60 .gpu/mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 64 --requests 128 --prompt-tokens 512 --max-tokens 256 \
    --ignore-eos=false $fmt --quiet $TOK --out $OUT/serve_${mode}_$r.csv > $OUT/sv_${mode}_$r.log 2>&1; echo "$mode $r rc=$?"
done; done
kill $spid; wait $spid 2>/dev/null
echo "== table"; for f in $OUT/serve_*.csv; do echo "$(basename $f) $(tail -1 $f | cut -d, -f1,9,10,11,13)"; done
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
