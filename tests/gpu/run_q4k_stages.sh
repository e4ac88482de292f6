#!/usr/bin/env bash
# Issue 11: the Q4_K tensor-core decode kernel's 9-16-row tiles with each warp's weights copied to shared
# memory (cp.async) STAGES super-blocks ahead (STRATA_Q4K_STAGES), optionally with fewer registers a thread
# (STRATA_Q4K_MAXNREG), beside the register path (0). The kernel tests (bits the same at 1, 9 and 16 rows)
# with the staged path, then the matrices at 16:8, 16:12 and 16 rows. VARIANTS: "STAGES:MAXNREG ..." .
# Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
check "kernel tests, staged" env STRATA_Q4K_STAGES=4 timeout 200 python3 -m pytest -q -p no:cacheprovider -x \
  tests/engine/test_q4k_mma.py
for v in ${VARIANTS:-0:0 2:0 4:0 4:168 2:168}; do
  step "STAGES ${v%:*} MAXNREG ${v#*:}"
  check "matmul $v" env STRATA_Q4K_STAGES=${v%:*} STRATA_Q4K_MAXNREG=${v#*:} timeout 120 python3 \
    tests/gpu/bench_q4k_mma.py --rows ${ROWS:-16:8,16:12,16} --shapes ${SHAPES:-qkv,gate|up,down}
done
summary
