#!/usr/bin/env bash
# Issue 11, twentieth session: 1-row tiles of the Q4_K tensor-core kernel loading two super-blocks ahead (the
# first two before the kernel waits for the one before it: STRATA_Q4K_AHEAD, default 2 there) against one.
# Kernel tests (bits unchanged), the matrices at 1 row from memory, the 8B bench at one stream. Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "kernel tests" tail_of 4 timeout 300 python3 -m pytest -q -p no:cacheprovider tests/engine/test_q4k_mma.py
for a in 2 1; do
  check "matmul 1 row AHEAD $a" env STRATA_Q4K_AHEAD=$a timeout 200 python3 tests/gpu/bench_q4k_mma.py --rows 1
done
l8b_and_smol
for a in 2 1 2; do
  check "bench 8b 1 AHEAD $a" env STRATA_Q4K_AHEAD=$a timeout 100 $S bench --model $M/l8b.gguf --streams 1 $B
done
summary
