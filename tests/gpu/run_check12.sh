#!/usr/bin/env bash
# The state that lands (issue 12): kernel tests under CUDA, batch-test IDENTICAL on the MoE model, and the
# qwen3-30b-a3b / llama-3-8b figures (decode 1 and 4 streams, 512-token prompt).
set -euo pipefail
source "$(dirname "$0")/env.sh"
check "kernel tests" timeout 150 python3 -m pytest -q -p no:cacheprovider tests/engine/test_attention_kernel.py \
  tests/engine/test_moe_gemv.py tests/engine/test_gpu_kernels.py
$S make-model --arch qwen3moe --shape small --mtp 1 --qtype Q4_K --out $M/moe.gguf >/dev/null
BT="timeout 100 $S batch-test --model $M/moe.gguf --max-tokens 24"
check "batch-test moe greedy" $BT --devices cuda:0 --parallel 4
check "batch-test moe 2 stages piped 2 sampled" $BT --devices cuda:0,cuda:0 --parallel 4 --batch-groups 2 --piped-mtp 2 \
  --temperature 0.8 --seed 5
$S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype Q4_K --out $M/q30.gguf >/dev/null
B="timeout 100 $S bench --model $M/q30.gguf --devices cuda:0"
check "30b decode 1,4" $B --streams 1,4 --parallel 4 --max-tokens 64 --ctx 1024
check "30b prompt 512" $B --streams 1 --prompt-tokens 512 --max-tokens 16 --ctx 2048
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
check "8b prompt 512" timeout 100 $S bench --model $M/l8b.gguf --devices cuda:0 --streams 1 --prompt-tokens 512 \
  --max-tokens 16 --ctx 2048
summary
