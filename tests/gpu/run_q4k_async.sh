#!/usr/bin/env bash
# Issue 11, twenty-fifth session: the Q4_K tensor-core kernel with its codes through shared memory (cp.async,
# S stages: STRATA_Q4K_STAGES / bench --stages; 0 = in registers as before). Kernel tests, per-matrix times at
# 1 row, a 16-row tile with 8 real rows and 16 rows, a warps x groups sweep at 16 rows, and the 8B bench at 1
# and 8 streams per stage count. Logs to $OUT/log.txt. Run with that variant (since removed: 1.3-2.4x slower
# at every row count, 8B one stream 455.7 -> 280-298 tok/s; a per-stage barrier the compiler inserts; see the
# twenty-fifth session's note on issue 11); bench_q4k_mma.py no longer takes --stages.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "kernel tests" tail_of 4 timeout 300 python3 -m pytest -q -p no:cacheprovider tests/engine/test_q4k_mma.py
step "per matrix, stages ${STAGES_LIST:=0,2,3,4}"
check "bench_q4k_mma" tail_of 24 timeout 200 python3 tests/gpu/bench_q4k_mma.py --rows 1,8,16:8,16 \
  --shapes qkv,gate,gate\|up,down --stages $STAGES_LIST
step "sweep at 16 rows, stages ${SWEEP_STAGES:=3}"
check "sweep" tail_of 6 timeout 200 python3 tests/gpu/bench_q4k_mma.py --rows 16:8,16 --shapes gate,down --sweep \
  --stages $SWEEP_STAGES
l8b_and_smol
for st in ${BENCH_STAGES:=0 3 4}; do
  check "bench 8b 1,8 stages $st" env STRATA_Q4K_STAGES=$st timeout 100 $S bench --model $M/l8b.gguf --streams 1,8 \
    --parallel 8 $B
done
summary
