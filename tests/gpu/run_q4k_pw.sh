#!/usr/bin/env bash
# Issue 11, thirty-seventh session: a 16-row tile's two passes in warps of their own (engine.kernels.q4k_mma
# PASS_WARPS 2: a program of twice the warps, each one pass's registers: 252 -> 130 in sm_90 SASS at 2
# warps a K share) against one warp sweeping the weights once for both (1). Kernel tests (the same bits
# every way), the matrices at 2-16 rows each way, Nsight Compute on gate 14336x4096 at 16 rows with 2,
# then the 8B shape at 8 and 16 streams each way and a sampled batch-test at 12 slots. Logs to $OUT/log.txt.
#   bash tests/gpu/run_q4k_pw.sh    carry [".whl"]    (E2E=0: stop after the matrices and the profile)
# Ran once on an H100 at commit 02156a9 (2026-12-06): no faster at 16 rows (gate|up 50.1 us against 49.9),
# slower at 16 with 8 real (50.2 against 33.9); the kernel code was reverted: check it out from 02156a9 to rerun.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
check "kernel tests" tail_of 4 timeout 200 python3 -m pytest -q -p no:cacheprovider tests/engine/test_q4k_mma.py
for pw in 1 2; do
  step "matrices, PASS_WARPS $pw"
  check "bench_q4k_mma PW=$pw" env STRATA_Q4K_PW=$pw timeout 120 python3 tests/gpu/bench_q4k_mma.py \
    --rows ${ROWS:-16:2,16:8,16:12,16} --shapes ${SHAPES:-qkv,gate|up,down}
done
NCU="ncu --clock-control none -k regex:q4k --launch-skip 4 --launch-count 1 --section SpeedOfLight \
  --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats"
KEY="Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issued Warp|No Eligible|Warp Cycles Per Issued|Block Limit Reg|Waves Per SM|L1/TEX Hit|L1/TEX Cache Th"
for job in 16:16:2 16:8:2; do
  IFS=: read -r rows nreal pw <<< "$job"
  check "ncu gate $rows:$nreal PW=$pw" tail_of 60 timeout 90 env STRATA_Q4K_PW=$pw SHAPE=14336x4096 \
    KERNEL=q4k ROWS=$rows NREAL=$nreal $NCU --section MemoryWorkloadAnalysis --log-file "$OUT/ncu-$rows-$nreal-$pw.txt" \
    python3 tests/gpu/ncu_imma.py
  grep -E "$KEY" "$OUT/ncu-$rows-$nreal-$pw.txt" | cut -c1-160 || true
done
[ "${E2E:-1}" = 1 ] || { summary; exit 0; }   # (summary returns 0 when every check passed)
l8b_and_smol
for n in 8 16; do
  for pw in 1 2; do
    check "bench 8b $n streams PW=$pw" env STRATA_Q4K_PW=$pw timeout 100 $S bench --model $M/l8b.gguf --streams $n \
      --parallel $n $B
  done
done
check "batch-test 8b sampled 12 slots PW=2" env STRATA_Q4K_PW=2 $BT --model $M/l8b.gguf --devices cuda:0 --parallel 12 \
  --temperature 0.8 --seed 4
summary
