#!/usr/bin/env bash
# Issue 11, session 11: the int8 tensor-core decode kernel with every load of its loop prefetched (Q4_K
# scales read as 32-bit words): its GPU tests, its sweep beside dp4a on the 8B shapes, one call under
# Nsight Compute (KERNEL=bf16 for the bf16 kernel, ROWS=1 for one row), the head-matrix crash of
# bench_matmul, and the split attention's chunking sweep.
set -euo pipefail
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv,noheader
check "imma tests on GPU" timeout 120 python3 -m pytest -q -p no:cacheprovider -x tests/engine/test_imma_matmul.py
[ -n "${NO_SWEEP:-}" ] || check "imma sweep" timeout 330 python3 tests/gpu/bench_matmul.py --no-checks --only llama-3-8b \
  --sweep-imma --matrices "gate|up,down,qkv,wo" --json "$OUT/imma.json"
[ -n "${NO_ATTN:-}" ] || check "attention chunks" timeout 150 python3 tests/gpu/bench_attention.py
[ -n "${NO_NCU:-}" ] || check "ncu ${KERNEL:-imma} gate|up ${ROWS:-16} rows" timeout 120 ncu --clock-control none \
  -k regex:"${KERNEL:-imma}" --launch-skip 4 \
  --launch-count 1 --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
  python3 tests/gpu/ncu_imma.py
[ -n "${NO_HEAD:-}" ] || check "head matrix (crash last session)" env CUDA_LAUNCH_BLOCKING=1 timeout 100 python3 \
  tests/gpu/bench_matmul.py --no-checks --only llama-3-8b --matrices head
summary
