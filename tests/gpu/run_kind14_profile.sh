#!/usr/bin/env bash
# Issues 11 / 12, session 44 (written, not yet run; about 4 minutes): why the table codes with a scale per 16
# (kind 14, IQ2_XS) lose at eight streams where IQ3_S's (kind 6) win. H100, 2026-12-07 (run_tables_w32.sh):
# 8-row gate|up 96 us against IQ3_S's 61-72, down 43 against 26-41; eight 8B IQ2_XS streams 1,032 tok/s
# against 1,168 as int8 codes. sass_report.py shows about the same instructions a unit step for both (kind
# 14: +10 IADD3, +5 IMAD; 96 registers at two weight rows an x load against 122), so time it on the GPU:
# compute-sanitizer over both kinds' decode calls (session 43's one illegal address), the x-load sharing and
# rows-a-pass sweeps, and Nsight Compute on the 8-row gate|up call of each. Carry [".whl"]. Log: $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
for q in IQ3_S IQ2_XS; do
  for r in 1 8; do
    check "memcheck dp4a $q down $r rows" timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 \
      env QTYPE=$q KERNEL=dp4a ROWS=$r SHAPE=4096x14336 python3 tests/gpu/ncu_imma.py
  done
done
check "kernels tables sweep xs" timeout 120 python3 tests/gpu/bench_matmul.py --no-checks --sweep-xs \
  --types IQ3_S,IQ2_XS --matrices "gate|up,down"
for q in IQ3_S IQ2_XS; do
  check "ncu dp4a $q gate|up 8 rows" timeout 120 ncu --clock-control none -k regex:dp4a --launch-skip 4 \
    --launch-count 1 --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
    --section Occupancy --section LaunchStats env QTYPE=$q KERNEL=dp4a ROWS=8 python3 tests/gpu/ncu_imma.py
done
summary
