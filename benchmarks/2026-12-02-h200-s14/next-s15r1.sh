# NOT RUN (prepared at the end of the fourteenth session, whose device time was spent): where constrained decoding's
# +27% ITL at 64 streams goes (issue 22; s14d: ITL 10.9-11.1 ms against 8.6-8.7 plain), beside a sampled load
# (temperature 0.8, top-p 0.95: rows sampled on the device, no run-ahead either). Three servers in turn, each
# profiling one decode step of the first run (MLXCEL_CUDA_PROFILE=150: step 150 is a 64-sequence decode step of the
# first wave), then a measured run with the server's metric deltas (`bench serve --metrics`: the engine's decode-step histogram): mean engine
# step time against the client's ITL says whether the time is inside the step (device: sample_rows against the
# argmax kernel; host: masks, upload) or between steps (no run-ahead for constrained rows).
# Predictions: plain decode step ~8.5 ms with run-ahead hiding the host; constrained step ~10.5 ms, of which
# sample_rows < 0.3 ms, the masks and their upload < 0.3 ms, and the rest the host's step work exposed without
# run-ahead (~1.5 ms at 64 sequences).
set -u
gunzip -kf .gpu/mlxcel.gz; chmod +x .gpu/mlxcel
export MLXCEL_CUDA_CACHE=/tmp/kc
TOK="--tokenizer .gpu/tokenizers/llama3_1"; SC=benchmarks/2026-12-02-h200-s13/ints_schema.json
for mode in plain sampled schema; do
  fmt=""; [ $mode = schema ] && fmt="--response-format @$SC"; [ $mode = sampled ] && fmt="--temperature 0.8 --top-p 0.95"
  MLXCEL_CUDA_PROFILE=150 .gpu/mlxcel serve --profile llama-3.1-8b-4bit --backend cuda --parallel 0 --ctx-size 4608 --port 18080 $TOK > $OUT/serve_$mode.log 2>&1 &
  spid=$!
  for _ in $(seq 1 120); do curl -sf http://127.0.0.1:18080/health >/dev/null 2>&1 && break; sleep 1; done
  for r in 1 2; do
    timeout 60 .gpu/mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 64 --requests 128 --prompt-tokens 512 --max-tokens 256 \
      --ignore-eos=false $fmt --metrics --quiet $TOK --out $OUT/sv_${mode}_$r.csv > $OUT/sv_${mode}_$r.log 2>&1
    echo "$mode $r: client $(tail -1 $OUT/sv_${mode}_$r.csv | cut -d, -f9,10,13); server (deltas over the run):"
    grep -E 'mlxcel_engine_step_duration_seconds_(sum|count).*decode|run_ahead_steps' $OUT/sv_${mode}_$r.log
  done
  kill $spid; wait $spid 2>/dev/null
  grep -E "sample_rows|argmax|total|step" $OUT/serve_$mode.log | head -12
done
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
