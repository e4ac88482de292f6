#!/usr/bin/env bash
# Issue 11 / 12: Q2_K in 2-bit planes for the int8 kernels (engine.kernels.packed.two_bit_planes, kind 12: the
# file's 2.625 bits a weight, STRATA_Q2K_PLANES=1, off until this measures it) against the GGUF-layout kernel
# (quant_matmul) and, for expert stacks, the per-expert loop with host syncs that Q2_K runs without it. Big
# MoE files at 2-3 bits put their experts in Q2_K. The kernel tests on the GPU, then the llama-3-8b shape in
# Q2_K one and eight streams each way (alternating), a sampled batch-test with planes; the qwen3-30b-a3b shape
# in Q2_K one and four streams with planes (without: one stream, 32 tokens); a sampled batch-test of the
# small MoE in Q2_K with planes, spec 3. If planes win: default STRATA_Q2K_PLANES on (engine/kernels/packed.py).
# Carry [".whl"]. Log: $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
check "kernel tests Q2_K planes" timeout 300 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_packed.py tests/engine/test_dp4a_gemv.py tests/engine/test_moe_gemv.py -k "Q2_K"
$S make-model --arch llama --shape llama-3-8b --qtype Q2_K --out $M/l8b-q2k.gguf >/dev/null
for planes in 0 1 0 1; do
  check "bench 8b Q2_K planes=$planes" env STRATA_Q2K_PLANES=$planes timeout 150 $S bench \
    --model $M/l8b-q2k.gguf --streams 1,8 --parallel 8 $B
done
check "batch-test 8b Q2_K planes sampled 8 slots" env STRATA_Q2K_PLANES=1 $BT --model $M/l8b-q2k.gguf \
  --devices cuda:0 --parallel 8 --temperature 0.8 --seed 6
rm -f $M/l8b-q2k.gguf
$S make-model --arch qwen3moe --shape small --mtp 1 --qtype Q2_K --out $M/moe-q2k.gguf >/dev/null
check "batch-test moe small Q2_K planes sampled, spec 3" env STRATA_Q2K_PLANES=1 $BT --model $M/moe-q2k.gguf \
  --devices cuda:0 --parallel 4 --draft mtp --spec 3 --temperature 0.8 --seed 3 --prompt-tokens 100
$S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype Q2_K --out /dev/shm/a3b-q2k.gguf >/dev/null
check "bench 30b-a3b Q2_K planes" env STRATA_Q2K_PLANES=1 timeout 200 $S bench --model /dev/shm/a3b-q2k.gguf \
  --streams 1,4 --parallel 4 $B
check "bench 30b-a3b Q2_K GGUF layout, 1 stream" env STRATA_Q2K_PLANES=0 timeout 200 $S bench \
  --model /dev/shm/a3b-q2k.gguf --streams 1 --parallel 1 --prompt-tokens 128 --max-tokens 32 --ctx 1024 --devices cuda:0
rm -f /dev/shm/a3b-q2k.gguf
summary
