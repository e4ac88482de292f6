#!/usr/bin/env bash
# Issue 11, nineteenth session: the Q4_K tensor-core decode kernel (engine/kernels/q4k_mma.py) as the default
# decode kernel, its weights repacked in its code order at load (engine.kernels.packed.mma_order; no second
# copy). The kernel and layout tests on the GPU, the 8B decode tile's kernels (1 and 8 rows), the batch-tests
# that cross stages, groups, graphs and drafts at the default, and the 8B bench at the default and with dp4a;
# SmolLM2 (Q4_1: dp4a either way) at the default. Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "kernel and layout tests" tail_of 12 timeout 200 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_q4k_mma.py tests/engine/test_packed.py
l8b_and_smol
check "decode tile kernels 8b" timeout 150 python3 tests/gpu/profile_stage.py $M/l8b.gguf 1 8
exact_layouts
check "batch-test 8b greedy 12 slots" timeout 150 $S batch-test --max-tokens 24 --model $M/l8b.gguf --devices cuda:0 \
  --parallel 12
for m in auto dp4a auto; do
  check "bench 8b 1,8 $m" timeout 100 $S bench --model $M/l8b.gguf --streams 1,8 --parallel 8 --decode-kernel $m $B
done
check "bench smol 1,8" timeout 100 $S bench --model $M/smol.gguf --streams 1,8 --parallel 8 $B
summary
