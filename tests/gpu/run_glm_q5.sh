#!/usr/bin/env bash
# Issue 12 / 16: GLM-4.5-Air's shape with Q5_0 stacks on the int8 kernels (engine.kernels.packed: Q5_0 as
# Q8_0's planes). With Q4_K experts (QTYPE_MAP '*_exps.weight=Q4_K') llama-quantize's fallback makes the
# down experts Q5_0 (K = 1408): before, those stacks ran the host-synced path (2026-12-07, one H100:
# 3.95 tok/s, 253 ms a window). Then the IQ4_XS-expert file (its shared expert's down is Q5_0 too:
# 46 launches of the GGUF-layout kernel, 0.73 ms of a 9.3 ms window). One stream each, and the decode
# tile by kernel at 1 row. glm4moe blocks also take the fused GPU block now (q|k|v biases in its q|k|v kernel):
# first a sampled batch-test on the small shape. Carry [".whl"]. Log: $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
$S make-model --arch glm4moe --shape small --qtype Q4_K --out $M/glm-s.gguf >/dev/null
check "batch-test glm4moe small sampled 4 slots" $BT --model $M/glm-s.gguf --devices cuda:0 --parallel 4 \
  --temperature 0.8 --seed 3
for map in '' '*_exps.weight=Q4_K'; do
  QTYPE_MAP=$map glm_air
  step "experts ${map:-IQ4_XS}: $GLM"
  check "bench glm-4.5-air ${map:-IQ4_XS}" timeout 150 $S bench --model $GLM --devices cuda:0 --streams 1 \
    --parallel 1 --max-tokens 64 --prompt-tokens 512 --ctx 2048
  check "profile_stage glm-4.5-air ${map:-IQ4_XS} 1" timeout 120 python3 tests/gpu/profile_stage.py $GLM 1
  rm -f $GLM
done
summary
