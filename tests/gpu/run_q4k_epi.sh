#!/usr/bin/env bash
# Issue 11: how much of engine.kernels.q4k_mma's time the per-element scaling costs. STRATA_Q4K_EPI_DROP (measuring
# only: wrong sums) 1 drops the mins' FMA (16-row loop 982 -> 691 sm_90 instructions a super-block), 2 the exact
# float conversion too (-> 570): the matrices at 1, 16:8 and 16 rows each way. If the time falls with the
# instructions, an x quantized per 256 values (the scaling in integers, 2 instructions an element and sub-block
# instead of 4) would pay. The knob lives in commit 10a00ef only (not yet run on a GPU): check
# engine/kernels/q4k_mma.py out from there to run this. Needs only the wheels (carry [".wheels"] or [".whl"]); log to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/wheels_env.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
for d in 0 1 2; do
  echo "=== EPI_DROP=$d"
  STRATA_Q4K_EPI_DROP=$d timeout 100 python3 tests/gpu/bench_q4k_mma.py --rows ${ROWS:-1,16:8,16} --shapes ${SHAPES:-gate|up,down}
done
