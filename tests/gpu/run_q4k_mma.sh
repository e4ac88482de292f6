#!/usr/bin/env bash
# Issue 11 (eight streams, Q4_K at 1-16 rows): the Q4_K tensor-core decode kernel (engine/kernels/q4k_mma.py,
# Gluon, mma.sync m16n8k32 by inline PTX, one kernel for every row count; the default decode kernel). Its row-invariance
# and accuracy test on the GPU, its microbenchmark beside the int8 kernel (SWEEP=1: over the warps a program),
# the 8B decode tile's kernels with it on and off (torch profiler, 1 and 8 rows), batch-tests with it on, and
# the 8B bench with it on and off. Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "q4k_mma rows independent and right" timeout 150 python3 -m pytest -q -p no:cacheprovider -x \
  tests/engine/test_q4k_mma.py
check "matmul 8b q4k_mma beside dp4a" timeout 200 python3 tests/gpu/bench_q4k_mma.py ${SWEEP:+--sweep}
l8b_and_smol
for m in q4k-mma dp4a; do
  check "decode tile kernels 8b, $m" env STRATA_DECODE_KERNEL=$m timeout 150 python3 tests/gpu/profile_stage.py \
    $M/l8b.gguf 1 8
done
check "batch-test 8b sampled 4 slots, q4k_mma" $BT --model $M/l8b.gguf --devices cuda:0 \
  --parallel 4 --temperature 0.8 --seed 4
check "batch-test 8b greedy 8 slots, q4k_mma" $BT --model $M/l8b.gguf --devices cuda:0 --parallel 8
for m in q4k-mma dp4a; do
  check "bench 8b 1,8 $m" env STRATA_DECODE_KERNEL=$m timeout 100 $S bench --model $M/l8b.gguf --streams 1,8 \
    --parallel 8 $B
done
summary
