#!/usr/bin/env bash
# Issue 11 / 12, session 43: run_iq_tables.sh's kernel bench hit an illegal address with STRATA_IQ_TABLES=1
# (after IQ3_S gate|up's 128-row tile) where end-to-end benches and batch-tests passed. With blocking
# launches: the kernel tests (the prompt tile's tensor-core kernel on the table codes included), then each
# matrix of bench_matmul alone, so the failing kernel is named; x rows a pass swept for the table codes:
# about 3 minutes. Carry [".whl"]. Log: $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
check "kernel tests, table codes" env STRATA_IQ_TABLES=1 timeout 150 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_packed.py tests/engine/test_dp4a_gemv.py -k "table or IQ1_M or (matmul_is_right and IQ)"
for m in down "gate|up"; do
  check "kernels tables=1 $m blocking" env STRATA_IQ_TABLES=1 CUDA_LAUNCH_BLOCKING=1 timeout 60 python3 \
    tests/gpu/bench_matmul.py --no-checks --types IQ3_S,IQ2_XS --matrices "$m"
done
check "kernels tables=1 sweep rb" env STRATA_IQ_TABLES=1 timeout 60 python3 tests/gpu/bench_matmul.py --no-checks \
  --sweep-rb --types IQ3_S,IQ2_XS --matrices "gate|up"
summary
