#!/usr/bin/env bash
# Issue 11, twentieth session: two super-blocks ahead in 1-row tiles of fewer than 1,024 groups of 16 rows only
# (gate|up keeps one). Kernel tests, a batch-test, the 8B bench at 1 and 8 streams. Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "kernel tests" tail_of 4 timeout 300 python3 -m pytest -q -p no:cacheprovider tests/engine/test_q4k_mma.py
l8b_and_smol
check "batch-test 8b sampled 4 slots" $BT --model $M/l8b.gguf --devices cuda:0 --parallel 4 --temperature 0.8 --seed 4
check "bench 8b 1,8" timeout 100 $S bench --model $M/l8b.gguf --streams 1,8 --parallel 8 $B
summary
