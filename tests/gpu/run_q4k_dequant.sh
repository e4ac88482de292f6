#!/usr/bin/env bash
# Issue 11: the prompt tiles' dequantizing kernel on the tensor-core order, 16 bytes a lane as the decode
# kernel reads them (the [pair, row, lane, word] block version read 5x slower than GGUF's order:
# run_q4k_close.sh). Kernel and layout tests, the dequantize timing beside GGUF's order, a sampled 8B
# batch-test and the 8B bench at the default. Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "kernel and layout tests" tail_of 12 timeout 300 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_q4k_mma.py tests/engine/test_packed.py -k "q4k or tensor_core or dequantize_kernel or unpack"
check "dequantize gguf vs mma order" timeout 120 python3 tests/gpu/bench_dequant.py
l8b_and_smol
check "batch-test 8b sampled 4 slots" $BT --model $M/l8b.gguf --devices cuda:0 --parallel 4 --temperature 0.8 --seed 4
check "bench 8b 1,8" timeout 100 $S bench --model $M/l8b.gguf --streams 1,8 --parallel 8 $B
summary
