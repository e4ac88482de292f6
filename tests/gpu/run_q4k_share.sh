#!/usr/bin/env bash
# Issue 11, thirty-sixth session: a 16-row tile's two passes share each sub-block's weight side
# (engine.kernels.q4k_mma SHARE: 252 -> 188 registers in sm_90 SASS). Kernel tests (the same bits either
# way), the matrices at 9-16 rows with it off, on, on at 168 registers, and with two super-blocks ahead
# (AHEAD=2: taken by the tiles of at most 8 real rows only), then the 8B shape at 16 streams
# (16-row tiles) with it off and on, and a sampled batch-test at 12 slots. Logs to $OUT/log.txt.
# Ran once on an H100 at commit e9d8fc0 (2026-12-06): SHARE slower at 9-16 rows (gate|up 49.9 -> 58.7 us,
# down 25.9 -> 29.6; 8B 16 streams 3,557 -> 3,385 tok/s) though 254 -> 186 registers: the grid, not the
# registers, holds the occupancy (0.85 waves). The kernel code was reverted; check it out from e9d8fc0 to rerun.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
check "kernel tests" tail_of 4 timeout 200 python3 -m pytest -q -p no:cacheprovider tests/engine/test_q4k_mma.py
R=${ROWS:-1,16:8,16:9,16:12,16}
for v in "SHARE=0" "SHARE=1" "SHARE=1 MAXNREG=168" "SHARE=1 AHEAD=2"; do
  step "matrices, $v"
  set -- $v
  check "bench_q4k_mma $v" env STRATA_Q4K_${1} ${2:+STRATA_Q4K_$2} timeout 120 python3 tests/gpu/bench_q4k_mma.py --rows $R --shapes ${SHAPES:-qkv,gate|up,down}
done
# Nsight Compute on gate 14336x4096: a 16-row tile with 8 real rows (eight streams), and 16 rows each way
NCU="ncu --clock-control none -k regex:q4k --launch-skip 4 --launch-count 1 --section SpeedOfLight \
  --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats"
KEY="Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issued Warp|No Eligible|Warp Cycles Per Issued|Block Limit Reg|Waves Per SM|stall|Stall"
for job in 16:8:0 16:16:0 16:16:1; do
  IFS=: read -r rows nreal share <<< "$job"
  check "ncu gate $rows:$nreal SHARE=$share" tail_of 60 timeout 90 env STRATA_Q4K_SHARE=$share SHAPE=14336x4096 \
    KERNEL=q4k ROWS=$rows NREAL=$nreal $NCU --log-file "$OUT/ncu-$rows-$nreal-$share.txt" python3 tests/gpu/ncu_imma.py
  grep -E "$KEY" "$OUT/ncu-$rows-$nreal-$share.txt" | cut -c1-160 || true
done
[ "${E2E:-1}" = 1 ] || { summary; exit 0; }   # (summary returns 0 when every check passed)
l8b_and_smol
for v in ${E2E_ORDER:-0 1}; do
  check "bench 8b 16 streams SHARE=$v" env STRATA_Q4K_SHARE=$v timeout 100 $S bench --model $M/l8b.gguf --streams 16 \
    --parallel 16 $B
done
check "batch-test 8b sampled 12 slots" $BT --model $M/l8b.gguf --devices cuda:0 --parallel 12 --temperature 0.8 --seed 4
summary
