#!/usr/bin/env bash
# Issue 12: the qwen3-30b-a3b shape's prompt (target: llama.cpp's 9,294 tok/s reading 512 tokens, one H200)
# with the prompt tile's experts on int8 tensor cores (STRATA_MOE_PROMPT_Q8=1, engine.kernels.moe_grouped_q8)
# against the default grouped kernel, alternating; layer 1's prompt tile each way (bench_moe.py), and a sampled
# batch-test of the small MoE shape with q8 on. Carry [".whl"]. Log: $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
$S make-model --arch qwen3moe --shape small --mtp 1 --qtype Q4_K --out $M/moe.gguf >/dev/null
check "batch-test moe small sampled 4 slots, int8 prompt experts" env STRATA_MOE_PROMPT_Q8=1 $BT --model $M/moe.gguf \
  --devices cuda:0 --parallel 4 --temperature 0.8 --seed 3 --prompt-tokens 100
F=/dev/shm/a3b.gguf
[ -f $F ] || $S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype Q4_K --out $F >/dev/null
for q8 in 0 1; do
  check "bench_moe 30b-a3b layer 1 q8=$q8" env STRATA_MOE_PROMPT_Q8=$q8 timeout 150 \
    python3 tests/gpu/bench_moe.py $F 1 2>&1 | grep -A1 "prompt tile"
done
for q8 in 0 1 0 1; do
  check "bench 30b-a3b prompt 512 q8=$q8" env STRATA_MOE_PROMPT_Q8=$q8 timeout 150 $S bench --model $F \
    --streams 1 --parallel 1 $B
done
summary
