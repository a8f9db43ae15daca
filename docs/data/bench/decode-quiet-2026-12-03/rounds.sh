set -e
cd /work/main
for R in 1 2 3 4 5 6 7; do
  uptime >> docs/data/bench/decode-quiet-2026-12-03/load.txt
  build/tools/kvjit/kvjit bench /root/.cache/kvjit/models/SmolLM2-135M-Instruct.Q4_1.gguf --runs 1 --bench_threads 2 --prompt_tokens 128 --gen_tokens 64 --report_json docs/data/bench/decode-quiet-2026-12-03/kvjit-batch1-$R.json > docs/data/bench/decode-quiet-2026-12-03/kvjit-batch1-$R.txt 2>&1
  /root/.cache/kvjit/llama.cpp-native/build-0.3.36/bin/llama-bench -m /root/.cache/kvjit/models/SmolLM2-135M-Instruct.Q4_1.gguf -p 128 -n 64 -t 2 -r 1 -o json > docs/data/bench/decode-quiet-2026-12-03/llama-bench-$R.json 2>/dev/null
done
uptime >> docs/data/bench/decode-quiet-2026-12-03/load.txt
