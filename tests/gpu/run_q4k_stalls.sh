#!/usr/bin/env bash
# Issue 11: what engine.kernels.q4k_mma's warps wait on, per tile (gate 14336x4096 at 1, 16:8 and 16 rows):
# Nsight Compute's stall reasons (warp cycles per issued instruction, by reason), the L1 requests, sectors and
# wavefronts of its global loads, and the throughput breakdowns of L1 and the SM. Needs only the wheels
# (carry [".wheels"] or [".whl"]); log to $OUT/log.txt.
# H100, 2026-12-06: 1 / 16:8 / 16 rows 20.9 / 21.7 / 30.8 us, 4.61 / 4.71 / 7.27 M warp instructions, issue slots
# 25-27% busy, long-scoreboard stalls 8.7 / 3.3 / 3.2 cycles an issued instruction, L1 data pipe 30 / 53 / 60% busy.
set -euo pipefail
source "$(dirname "$0")/wheels_env.sh"
M="regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,gpu__time_duration.sum"
M+=",l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
M+=",l1tex__data_pipe_lsu_wavefronts_mem_global_op_ld.sum,l1tex__t_sector_hit_rate.pct,smsp__inst_executed.sum"
M+=",breakdown:l1tex__throughput.avg.pct_of_peak_sustained_active,breakdown:sm__throughput.avg.pct_of_peak_sustained_active"
for job in ${JOBS:-1:1 16:8 16:16}; do
  IFS=: read -r rows nreal <<< "$job"
  echo "=== gate 14336x4096 $rows rows, $nreal real"
  timeout 120 env SHAPE=14336x4096 KERNEL=q4k ROWS=$rows NREAL=$nreal ncu --clock-control none -k regex:q4k \
    --launch-skip 4 --launch-count 1 --metrics "$M" python3 tests/gpu/ncu_imma.py 2>&1 \
    | grep -E "^\s+[a-z0-9_]+__" | awk '$NF != "0" && $NF != "0.00"' | sed 's/  */ /g' || true
done
