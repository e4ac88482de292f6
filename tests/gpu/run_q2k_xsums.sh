#!/usr/bin/env bash
# Issues 11 / 12, session 42 (written, not yet run): Q2_K's planes with each x row's sums per 16 taken once per
# x load (STRATA_Q2K_XSUMS=1: an XS == 2 thread's two weight rows share them) against once per weight row.
# Session 42 measured the planes' eight 8B streams at 860 tok/s (2 x rows a pass) against the GGUF-layout
# kernel's 996, a row costing twice Q3_K's dp4a. The kernel test with the flag on, the 8B matrices at 1-16
# rows with rows a pass swept (each way), the 8B one and eight streams each way (twice), a sampled
# batch-test with it. If it wins: dp4a_gemv.Q2K_XSUMS on by default. Carry [".whl"]. Log: $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
check "kernel test, x sums once per x load" env STRATA_Q2K_XSUMS=1 timeout 200 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_dp4a_gemv.py -k "q2k_x_sums or Q2_K"
for f in 0 1; do
  check "Q2_K kernels xsums=$f" env STRATA_Q2K_XSUMS=$f timeout 150 python3 tests/gpu/bench_matmul.py --no-checks \
    --sweep-rb --types Q2_K --matrices "gate|up,down,qkv"
done
$S make-model --arch llama --shape llama-3-8b --qtype Q2_K --out $M/l8b.gguf >/dev/null
for f in 0 1 0 1; do
  check "bench 8b Q2_K xsums=$f" env STRATA_Q2K_XSUMS=$f timeout 90 $S bench --model $M/l8b.gguf --streams 1,8 \
    --parallel 8 --prompt-tokens 256 --max-tokens 64 --ctx 512 --devices cuda:0
done
check "batch-test 8b Q2_K xsums sampled 8 slots" env STRATA_Q2K_XSUMS=1 $BT --model $M/l8b.gguf --devices cuda:0 \
  --parallel 8 --temperature 0.8 --seed 6
summary
