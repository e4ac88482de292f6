#!/usr/bin/env bash
# Issue 11 (eight streams): what binds the int8 decode kernel at eight rows, and the lane-by-lane tensor-core
# twin (engine/kernels/dp4a_mma.py) measured for the first time. Nsight Compute on the 8B gate|up
# (28672x4096 Q4_K) at 1 and 8 rows and down (4096x14336) at 8 rows (issue rate, warp stalls, L1 and DRAM);
# then the twin's bits against the int8 kernel on the GPU, its microbenchmark beside the int8 kernel, a
# sampled batch-test with it on and eight 8B streams with it on and off. Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
NCU="ncu --clock-control none -k regex:dp4a --launch-skip 4 --launch-count 1 --section SpeedOfLight \
  --section WarpStateStats --section MemoryWorkloadAnalysis --section InstructionStats --section Occupancy"
for job in 28672x4096:1 28672x4096:8 4096x14336:8; do
  check "ncu dp4a Q4_K ${job%:*} ${job#*:} rows" timeout 100 $NCU \
    env SHAPE=${job%:*} KERNEL=dp4a ROWS=${job#*:} python3 tests/gpu/ncu_imma.py
done
check "twin bits against the int8 kernel on the GPU" timeout 150 python3 -m pytest -q -p no:cacheprovider -x \
  tests/engine/test_dp4a_mma.py
check "matmul 8b gate|up,down with the twin" timeout 150 python3 tests/gpu/bench_matmul.py --no-checks \
  --only llama-3-8b --matrices "gate|up,down" --sweep-dmma
l8b_and_smol
check "batch-test 8b sampled 4 slots, twin" env STRATA_DP4A_MMA=1 $BT --model $M/l8b.gguf --devices cuda:0 \
  --parallel 4 --temperature 0.8 --seed 4
for m in 1 0; do
  check "bench 8b 1,8 twin $m" env STRATA_DP4A_MMA=$m timeout 100 $S bench --model $M/l8b.gguf --streams 1,8 \
    --parallel 8 $B
done
summary
