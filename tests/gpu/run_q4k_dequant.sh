#!/usr/bin/env bash
# Issue 11: the tensor-core order with each lane's 16 bytes as row g's 8 then row g + 8's (the MMA's A registers
# a0, a2, a1, a3), so the prompt tiles' dequantizing kernel reads it 8 bytes a row as it reads GGUF's order
# (the [pair, row, lane, word] block version read 5x slower than GGUF's order, run_q4k_close.sh; the 32-bit word
# version 1.5x). Kernel and layout tests, the dequantize timing beside GGUF's order, a sampled 8B batch-test
# and the 8B bench at the default. Logs to $OUT/log.txt.
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
