# s12r5 (s12r5.sh): the server and the load generator that made cuda_h200_serve_2026-12-01.csv, on one H200,
# synthetic Llama-3.1-8B 4-bit weights (profile llama-3.1-8b-4bit), the build of commit "cuda: qmm4 from 33 rows".
mlxcel serve --profile llama-3.1-8b-4bit --backend cuda --parallel 0 --ctx-size 4608 --port 18080 --tokenizer .gpu/tokenizers/llama3_1
#   -> "KV cache 61027 blocks of 16 tokens (122054 MiB) from 90% of 146591680 KiB ...; 238 parallel slots"
mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 1   --requests 4   --prompt-tokens 512  --max-tokens 256 --ignore-eos --metrics
mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 16  --requests 32  --prompt-tokens 512  --max-tokens 256 --ignore-eos --metrics
mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 64  --requests 128 --prompt-tokens 512  --max-tokens 256 --ignore-eos --metrics
mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 128 --requests 256 --prompt-tokens 512  --max-tokens 256 --ignore-eos --metrics
mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 16  --requests 32  --prompt-tokens 4096 --max-tokens 128 --ignore-eos --metrics
