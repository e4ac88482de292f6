#!/usr/bin/env bash
# Issue 11: where the Q4_K tensor-core decode kernel (engine/kernels/q4k_mma.py) spends its
# time. Nsight Compute on it at one row (8B gate|up 28672x4096 and qkv 6144x4096) and eight rows (gate|up);
# its microbenchmark beside the int8 kernel; the 8B decode tile's kernels with it on (1 and 8 rows, torch
# profiler); eight and one 8B streams with it on. Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
NCU="ncu --clock-control none -k regex:q4k --launch-skip 4 --launch-count 1 --section SpeedOfLight \
  --section WarpStateStats --section MemoryWorkloadAnalysis --section InstructionStats --section Occupancy"
for job in 28672x4096:1 6144x4096:1 28672x4096:8; do
  check "ncu q4k_mma ${job%:*} ${job#*:} rows" timeout 80 $NCU \
    env SHAPE=${job%:*} KERNEL=q4k ROWS=${job#*:} python3 tests/gpu/ncu_imma.py
done
check "q4k_mma rows independent and right" timeout 100 python3 -m pytest -q -p no:cacheprovider -x \
  tests/engine/test_q4k_mma.py
check "matmul 8b q4k_mma beside dp4a" timeout 100 python3 tests/gpu/bench_q4k_mma.py
l8b_and_smol
check "decode tile kernels 8b, q4k_mma" env timeout 150 python3 tests/gpu/profile_stage.py \
  $M/l8b.gguf 1 8
check "bench 8b 1,8 q4k_mma" env timeout 100 $S bench --model $M/l8b.gguf --streams 1,8 \
  --parallel 8 $B
summary
