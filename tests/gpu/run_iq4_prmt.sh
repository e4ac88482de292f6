#!/usr/bin/env bash
# Issue 12 / 14: the prompt kernels' IQ4_NL / IQ4_XS values by byte permutes (engine.kernels.stream_matmul
# IQ4_PRMT: kvalues8, four codes a word; off by default until this measures it) against the select tree per
# code (STRATA_IQ4_PRMT=0). GLM-4.5-Air's
# prompt tile spent 180.7 of 213.3 ms in the grouped expert kernel (IQ4_XS gate|up, IQ4_NL down: one H100,
# 2026-12-07, run_glm_prompt.sh). First the kernel tests on the GPU (IQ4 and the int8-value types), then
# GLM-4.5-Air's layer 1 prompt tiles (bench_moe.py) and one stream's bench each way, then the llama-3-8b
# shape in IQ4_XS (the dense prompt's dequantize kernel) each way, and a sampled batch-test of GLM's small
# shape in IQ4_XS. Also the prompt tile's experts on int8 tensor cores (engine.kernels.moe_grouped_q8,
# STRATA_MOE_PROMPT_Q8=1): its kernel tests, a sampled batch-test, bench_moe and bench. Carry [".whl"].
# QUICK=1: the new kernels' tests, the q8 batch-test and bench_moe with q8 off and on only. Log: $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
K="IQ4 or Q6_K or Q5_K or Q5_1 or int8_value or int8_tensor"
[ -z "${QUICK:-}" ] || K="int8_tensor or (Q6_K and layout) or (IQ4_XS and dequantize)"
check "kernel tests ($K), IQ4 permutes on" env STRATA_IQ4_PRMT=1 timeout 300 python3 -m pytest -q -p no:cacheprovider tests/engine/test_packed.py \
  tests/engine/test_moe_gemv.py -k "$K"
$S make-model --arch glm4moe --shape small --qtype IQ4_XS --out $M/glm-s.gguf >/dev/null
[ -n "${QUICK:-}" ] || check "batch-test glm4moe small IQ4_XS sampled 4 slots" $BT --model $M/glm-s.gguf --devices cuda:0 --parallel 4 \
  --temperature 0.8 --seed 3
check "batch-test glm4moe small IQ4_XS sampled 4 slots, int8 prompt experts" env STRATA_MOE_PROMPT_Q8=1 $BT \
  --model $M/glm-s.gguf --devices cuda:0 --parallel 4 --temperature 0.8 --seed 3
glm_air; F=$GLM
VS=("1 0" "0 0" "1 1"); [ -z "${QUICK:-}" ] || VS=("1 0" "1 1")
for v in "${VS[@]}"; do
  set -- $v
  check "bench_moe glm-4.5-air layer 1 prmt=$1 q8=$2" env STRATA_IQ4_PRMT=$1 STRATA_MOE_PROMPT_Q8=$2 timeout 150 \
    python3 tests/gpu/bench_moe.py $F 1 2>&1 | grep -A1 "prompt tile"
done
[ -n "${QUICK:-}" ] || for v in "1 0" "1 1"; do
  set -- $v
  check "bench glm-4.5-air 1 stream prmt=$1 q8=$2" env STRATA_IQ4_PRMT=$1 STRATA_MOE_PROMPT_Q8=$2 timeout 150 $S bench \
    --model $F --devices cuda:0 --streams 1 --parallel 1 --max-tokens 64 --prompt-tokens 512 --ctx 2048
done
rm -f $F
summary
