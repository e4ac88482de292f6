#!/usr/bin/env bash
# Issue 11: Q5_0 on the int8 kernels (engine.kernels.packed: Q8_0's planes) against the GGUF-layout kernel
# it replaces (STRATA_GPU_KEEP=Q5_0). The gemma3-270m shape's q, k, v, gate and up have K = 640, so a Q4_K
# file has them in Q5_0 (as the real Gemma 3 270M Q4_K_M: 81 of its 127 matrices). One and eight streams
# each way, then sampled batch-tests. Carry [".whl"]. Log: $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
$S make-model --arch gemma3 --shape gemma3-270m --qtype Q4_K --out $M/g270.gguf >/dev/null
for keep in Q5_0 '' Q5_0 ''; do
  check "bench gemma3-270m keep=${keep:-none}" env STRATA_GPU_KEEP=$keep timeout 120 $S bench --model $M/g270.gguf \
    --devices cuda:0 --streams 1,8 --parallel 8 --max-tokens 128 --prompt-tokens 512 --ctx 2048
done
check "batch-test gemma3-270m sampled 8 slots" $BT --model $M/g270.gguf --devices cuda:0 --parallel 8 \
  --temperature 0.8 --seed 8
summary
