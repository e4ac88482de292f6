#!/usr/bin/env bash
# Issues 12 and 14 after the prompt-tile changes (64-row tensor-core programs, MoE pair blocks, grouped
# prompt attention): kernel tests under CUDA, batch-test IDENTICAL (qwen3moe small, llama-3-8b shape),
# prompt reading 512 / 4096 tokens and decode on the qwen3-30b-a3b and llama-3-8b shapes, a prompt tile's
# profile, and the alternatives by environment (STRATA_MMA_BM=16, STRATA_MOE_BM=32) side by side.
set -euo pipefail
source "$(dirname "$0")/env.sh"
check "kernel tests" timeout 200 python3 -m pytest -q -p no:cacheprovider -x tests/engine/test_attention_kernel.py \
  tests/engine/test_moe_gemv.py tests/engine/test_gpu_kernels.py tests/engine/test_dp4a_gemv.py
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
B8="timeout 100 $S bench --model $M/l8b.gguf --devices cuda:0 --streams 1"
check "8b prompt 512" $B8 --prompt-tokens 512 --max-tokens 16 --ctx 2048
check "8b prompt 512, MMA_BM 16" env STRATA_MMA_BM=16 $B8 --prompt-tokens 512 --max-tokens 16 --ctx 2048
check "8b prompt 4096" $B8 --prompt-tokens 4096 --max-tokens 16 --ctx 8192
check "8b decode 1" $B8 --max-tokens 64 --ctx 1024
check "batch-test 8b greedy" timeout 100 $S batch-test --model $M/l8b.gguf --devices cuda:0 --parallel 4 --max-tokens 24
$S make-model --arch qwen3moe --shape small --mtp 1 --qtype Q4_K --out $M/moe.gguf >/dev/null
BT="timeout 100 $S batch-test --model $M/moe.gguf --max-tokens 24"
check "batch-test moe greedy" $BT --devices cuda:0 --parallel 4
check "batch-test moe 2 stages piped 2 sampled" $BT --devices cuda:0,cuda:0 --parallel 4 --batch-groups 2 --piped-mtp 2 \
  --temperature 0.8 --seed 5
$S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype Q4_K --out $M/q30.gguf >/dev/null
B="timeout 120 $S bench --model $M/q30.gguf --devices cuda:0"
check "30b prompt 512" $B --streams 1 --prompt-tokens 512 --max-tokens 16 --ctx 2048
check "30b prompt 512, MOE_BM 32" env STRATA_MOE_BM=32 $B --streams 1 --prompt-tokens 512 --max-tokens 16 --ctx 2048
check "30b prompt 4096" $B --streams 1 --prompt-tokens 4096 --max-tokens 16 --ctx 8192
check "30b decode 1,4" $B --streams 1,4 --parallel 4 --max-tokens 64 --ctx 1024
check "30b prompt tile profile" timeout 120 python3 tests/gpu/profile_stage.py $M/q30.gguf prompt
summary
