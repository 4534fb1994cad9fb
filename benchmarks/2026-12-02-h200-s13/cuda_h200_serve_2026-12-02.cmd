# s13r4 (s13r4.sh): the server and the load generator that made cuda_h200_serve_2026-12-02.csv (concurrency
# 1/16/64/128, 512-token prompts, 256 output tokens) and cuda_h200_serve_2026-12-02_long.csv (4096-token
# prompts, 128 output tokens, concurrency 16), on one H200, synthetic Llama-3.1-8B 4-bit weights (profile
# llama-3.1-8b-4bit), the build of main after the s13-gptoss and s13-qwen35 merges (attn_dtile, qmm4's narrow form).
mlxcel serve --profile llama-3.1-8b-4bit --backend cuda --parallel 0 --ctx-size 4608 --port 18080 --tokenizer .gpu/tokenizers/llama3_1
mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 1   --requests 4   --prompt-tokens 512  --max-tokens 256 --ignore-eos --metrics
mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 16  --requests 32  --prompt-tokens 512  --max-tokens 256 --ignore-eos --metrics
mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 64  --requests 128 --prompt-tokens 512  --max-tokens 256 --ignore-eos --metrics
mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 128 --requests 256 --prompt-tokens 512  --max-tokens 256 --ignore-eos --metrics
mlxcel bench serve --url http://127.0.0.1:18080 --concurrency 16  --requests 32  --prompt-tokens 4096 --max-tokens 128 --ignore-eos --metrics
