#!/usr/bin/env bash
# Issue 11, nineteenth session's closing run: the prompt tiles' dequantizing kernel reading the tensor-core
# order in [pair, row, lane, word] blocks (scales per pair and row alone), timed beside GGUF's order; the kernel
# and layout tests; the batch-tests across stages, groups and drafts; the 8B bench at the default (q4k-mma) and
# with dp4a, SmolLM2 at the default. Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "kernel and layout tests" tail_of 12 timeout 300 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_q4k_mma.py tests/engine/test_packed.py -k "q4k or tensor_core or dequantize_kernel or unpack"
check "dequantize gguf vs mma order" timeout 120 python3 tests/gpu/bench_dequant.py
check "matmul 8b q4k_mma beside dp4a" timeout 200 python3 tests/gpu/bench_q4k_mma.py
l8b_and_smol
exact_layouts
for m in q4k-mma dp4a q4k-mma; do
  check "bench 8b 1,8 $m" timeout 100 $S bench --model $M/l8b.gguf --streams 1,8 --parallel 8 --decode-kernel $m $B
done
check "bench smol 1,8" timeout 100 $S bench --model $M/smol.gguf --streams 1,8 --parallel 8 $B
summary
