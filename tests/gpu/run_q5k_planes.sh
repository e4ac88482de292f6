#!/usr/bin/env bash
# Issue 11 / 12: Q5_K in 5-bit planes (engine.kernels.packed.five_bit_planes, kind 11: 5.625 bits a weight,
# STRATA_Q5K_PLANES=1, off until this measures it) against int8 codes (kind 9: 10 bits). A Q5_K_M file has
# nearly every matrix in Q5_K. The kernel tests on the GPU, then the llama-3-8b shape in Q5_K one and eight
# streams each way (alternating, twice; and 8 x rows a pass with planes), a sampled batch-test with planes;
# the qwen3-30b-a3b shape in Q5_K one and four streams each way; a sampled batch-test of the small MoE in
# Q5_K with planes, spec 3. If planes win: make STRATA_Q5K_PLANES default on (engine/model_info.py).
# Carry [".whl"]. Log: $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
check "kernel tests Q5_K (int8 codes and planes)" timeout 300 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_packed.py tests/engine/test_dp4a_gemv.py tests/engine/test_moe_gemv.py -k "Q5_K"
$S make-model --arch llama --shape llama-3-8b --qtype Q5_K --out $M/l8b-q5k.gguf >/dev/null
for v in "0 4" "1 4" "0 4" "1 4" "1 8"; do
  set -- $v
  check "bench 8b Q5_K planes=$1 rb=$2" env STRATA_Q5K_PLANES=$1 STRATA_DP4A_RB=$2 timeout 150 $S bench \
    --model $M/l8b-q5k.gguf --streams 1,8 --parallel 8 $B
done
check "batch-test 8b Q5_K planes sampled 8 slots" env STRATA_Q5K_PLANES=1 $BT --model $M/l8b-q5k.gguf \
  --devices cuda:0 --parallel 8 --temperature 0.8 --seed 6
rm -f $M/l8b-q5k.gguf
$S make-model --arch qwen3moe --shape small --mtp 1 --qtype Q5_K --out $M/moe-q5k.gguf >/dev/null
check "batch-test moe small Q5_K planes sampled, spec 3" env STRATA_Q5K_PLANES=1 $BT --model $M/moe-q5k.gguf \
  --devices cuda:0 --parallel 4 --draft mtp --spec 3 --temperature 0.8 --seed 3 --prompt-tokens 100
$S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype Q5_K --out /dev/shm/a3b-q5k.gguf >/dev/null
for planes in 0 1; do
  check "bench 30b-a3b Q5_K planes=$planes" env STRATA_Q5K_PLANES=$planes timeout 200 $S bench \
    --model /dev/shm/a3b-q5k.gguf --streams 1,4 --parallel 4 $B
done
rm -f /dev/shm/a3b-q5k.gguf
summary
