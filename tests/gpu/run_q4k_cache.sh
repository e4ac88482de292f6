#!/usr/bin/env bash
# Issue 11, twenty-third session, call A (run with the STRATA_Q4K_WC switch, since removed: its diff in the
# session's closing note) (carry [".mdl/a", ".wheels"]): keeps the default model's first half
# for run_mtp_train.sh b (the machine must stay warm: call b at once), then the Q4_K tensor-core kernel with its
# weights' loads past L1 (STRATA_Q4K_WC 1 .cg, 2 evict_first, 3 .cs) against as now (0), at 1 row, a 16-row tile
# with 8 real rows and 16 rows, and the warps x groups sweep at 16 rows with .cg. Logs to $OUT/log.txt.
set -uo pipefail
bash tests/gpu/run_mtp_train.sh a
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .wheels/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
for wc in 0 1 2 3 0; do
  echo "=== STRATA_Q4K_WC=$wc"
  STRATA_Q4K_WC=$wc timeout 150 python3 tests/gpu/bench_q4k_mma.py --rows 1,16:8,16 --shapes qkv,gate,gate\|up,down 2>&1 | tail -n 12
done
echo "=== sweep at 16 rows, WC=1"
STRATA_Q4K_WC=1 timeout 200 python3 tests/gpu/bench_q4k_mma.py --rows 16:8,16 --shapes gate,down --sweep 2>&1 | tail -n 6
echo "=== sweep at 16 rows, WC=0"
STRATA_Q4K_WC=0 timeout 200 python3 tests/gpu/bench_q4k_mma.py --rows 16:8,16 --shapes gate,down --sweep 2>&1 | tail -n 6
