#!/usr/bin/env bash
# Issue 11 / 12: Q6_K in 6-bit planes (engine.kernels.packed.six_bit_planes, kind 10: the file's 6.5625 bits
# a weight, STRATA_Q6K_PLANES=1) against int8 codes (kind 8: 10 bits). A Q4_K_M file has its head, half its v
# and down matrices (and Qwen3-30B-A3B's down experts in half the layers) in Q6_K.
# The kernel tests on the GPU (both Q6_K layouts), then the llama-3-8b shape with a Q6_K head, v and down,
# one and eight streams each way (alternating, twice), a sampled batch-test with planes; then the
# qwen3-30b-a3b shape with Q6_K down experts, one and four streams each way, and a sampled batch-test of the
# small MoE with Q6_K down experts in planes. Carry [".whl"]. Log: $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
check "kernel tests Q6_K (int8 codes and planes)" timeout 300 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_packed.py tests/engine/test_dp4a_gemv.py tests/engine/test_moe_gemv.py -k "Q6_K"
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K \
  --qtype-map 'output.weight=Q6_K,*.attn_v.weight=Q6_K,*.ffn_down.weight=Q6_K' --out $M/l8b-q6.gguf >/dev/null
for planes in 0 1 0 1; do
  check "bench 8b Q6_K head/v/down planes=$planes" env STRATA_Q6K_PLANES=$planes timeout 150 $S bench \
    --model $M/l8b-q6.gguf --streams 1,8 --parallel 8 $B
done
check "batch-test 8b Q6_K head/v/down planes sampled 8 slots" env STRATA_Q6K_PLANES=1 $BT --model $M/l8b-q6.gguf \
  --devices cuda:0 --parallel 8 --temperature 0.8 --seed 6
rm -f $M/l8b-q6.gguf
$S make-model --arch qwen3moe --shape small --mtp 1 --qtype Q4_K --qtype-map '*.ffn_down_exps.weight=Q6_K' \
  --out $M/moe-q6.gguf >/dev/null
check "batch-test moe small Q6_K down experts planes sampled, spec 3" env STRATA_Q6K_PLANES=1 $BT \
  --model $M/moe-q6.gguf --devices cuda:0 --parallel 4 --draft mtp --spec 3 --temperature 0.8 --seed 3
$S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype Q4_K --qtype-map '*.ffn_down_exps.weight=Q6_K' \
  --out /dev/shm/a3b-q6.gguf >/dev/null
for planes in 0 1; do
  check "bench 30b-a3b Q6_K down experts planes=$planes" env STRATA_Q6K_PLANES=$planes timeout 200 $S bench \
    --model /dev/shm/a3b-q6.gguf --streams 1,4 --parallel 4 $B
done
rm -f /dev/shm/a3b-q6.gguf
summary
