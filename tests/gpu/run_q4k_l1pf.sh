#!/usr/bin/env bash
# Issue 11, thirty-seventh session: ptxas sinks the next super-block's weight loads of engine.kernels.q4k_mma
# to the end of the loop body (sm_90 SASS, every tile: tests/gpu/sass_report.py q4k), so they are asked for
# just before they are used. STRATA_Q4K_L1PF=D pulls the code lines D super-blocks ahead into L1 at the top of
# each step (prefetch.global.L1). Kernel tests with it on, then the matrices at 1, 16:8 and 16 rows with
# D = 0, 1, 2 (and PASS_WARPS 2 with D = 1). Needs only the wheels (carry [".wheels"] or [".whl"]); log
# to $OUT/log.txt.
# Ran once on an H100 at commit 02156a9 (2026-12-06): no gain (gate|up 16:8 32.5-34.0 us against 33.9, one
# row 35.6-38.0 against 28.0); the kernel code was reverted: check it out from 02156a9 to rerun.
set -euo pipefail
source "$(dirname "$0")/wheels_env.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
rc=0
STRATA_Q4K_L1PF=1 timeout 200 python3 -m pytest -q -p no:cacheprovider tests/engine/test_q4k_mma.py 2>&1 | tail -3 || rc=1
for v in "L1PF=0" "L1PF=1" "L1PF=2" "L1PF=1 PW=2"; do
  echo "=== $v"
  env $(for a in $v; do echo STRATA_Q4K_$a; done) timeout 120 python3 tests/gpu/bench_q4k_mma.py \
    --rows ${ROWS:-1,16:8,16} --shapes ${SHAPES:-qkv,gate|up,down} || rc=1
done
exit $rc
