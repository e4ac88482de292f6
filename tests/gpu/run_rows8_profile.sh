#!/usr/bin/env bash
# Issue 11, for the next session: what binds the int8 decode kernel at eight rows (eight 8B streams are
# 1,319-1,342 tok/s against the 1,540 target; gate|up Q4_K 24.8 us at one row, 71.3 at eight, where its
# dp4a alone would take ~14 us and halving the x reads through L1 (XS 2) gained 7%). Nsight Compute on
# the 8B gate|up (28672x4096) and down (4096x14336) calls at 1 and 8 rows: issue rate, warp stalls, L1
# and DRAM, the instruction mix; then the decode tile's kernels at 1 and 8 rows. Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
for shape in 28672x4096 4096x14336; do
  for rows in 1 8; do
    check "ncu dp4a Q4_K $shape $rows rows" timeout 150 ncu --clock-control none -k regex:dp4a --launch-skip 4 \
      --launch-count 1 --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
      --section ComputeWorkloadAnalysis --section InstructionStats --section Occupancy \
      env SHAPE=$shape KERNEL=dp4a ROWS=$rows python3 tests/gpu/ncu_imma.py
  done
done
l8b_and_smol
check "decode tile 8b" timeout 150 python3 tests/gpu/profile_stage.py $M/l8b.gguf 1 8
summary
