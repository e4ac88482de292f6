#!/usr/bin/env bash
# Issue 11, twentieth session: the Q4_K tensor-core decode kernel with two or four 16-row groups a warp (one x
# fragment for several MMAs: STRATA_Q4K_TM) and a 16-row tile's two passes in one sweep of the weights. The
# kernel tests (bits unchanged across groups a warp), the per-matrix sweep of warps and groups (weights from
# memory) at 1 row, 16 rows and a 16-row tile with 8 real rows (eight streams), and the 8B bench at the
# default and at TM $TMS. Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "kernel tests" tail_of 12 timeout 300 python3 -m pytest -q -p no:cacheprovider tests/engine/test_q4k_mma.py
check "matmul sweep W x TM" timeout 300 python3 tests/gpu/bench_q4k_mma.py --sweep --rows ${ROWS:-1,16:8,16}
l8b_and_smol
for tm in 0 ${TMS:-2}; do
  check "bench 8b 1,8 TM $tm" env STRATA_Q4K_TM=$tm timeout 100 $S bench --model $M/l8b.gguf --streams 1,8 \
    --parallel 8 $B
done
summary
