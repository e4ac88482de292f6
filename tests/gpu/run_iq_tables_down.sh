#!/usr/bin/env bash
# Issue 11 / 12, session 43: the shortest check of the illegal address run_iq_tables.sh met (about 2 minutes):
# the decode kernel's table-code tests on the GPU, then bench_matmul on the down matrix alone with blocking
# launches (IQ3_S: kind 6; IQ2_XS: kind 14). Carry [".whl"]. Log: $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
check "decode kernel tests, table codes" env STRATA_IQ_TABLES=1 timeout 80 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_dp4a_gemv.py -k "table"
check "kernels tables=1 down blocking" env STRATA_IQ_TABLES=1 CUDA_LAUNCH_BLOCKING=1 timeout 50 python3 \
  tests/gpu/bench_matmul.py --no-checks --types IQ3_S,IQ2_XS --matrices down
summary
