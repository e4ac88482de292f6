#!/usr/bin/env bash
# Issue 11, twentieth session's closing run: the Q4_K tensor-core decode kernel at its new defaults (W the
# fewest of 2/4/8 warps giving 1,536 warps, 16-row groups a warp by tile: engine.kernels.q4k_mma.groups).
# GPU kernel tests; the 8B decode tile's kernels at 1 and 8 rows (and 1 row with dp4a); batch-tests across
# stages, groups and drafts and 12 slots (a 16-row tile's two passes in one sweep); the 8B bench at the
# default, with dp4a and with STRATA_Q4K_PF=1; SmolLM2's. Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "gpu kernel tests" tail_of 6 timeout 400 python3 -m pytest -q -p no:cacheprovider -x \
  tests/engine/test_q4k_mma.py tests/engine/test_gpu_kernels.py
l8b_and_smol
check "decode tile kernels 8b" timeout 150 python3 tests/gpu/profile_stage.py $M/l8b.gguf 1 8
check "decode tile kernels 8b dp4a" env STRATA_DECODE_KERNEL=dp4a timeout 150 python3 tests/gpu/profile_stage.py \
  $M/l8b.gguf 1
exact_layouts
check "batch-test 8b greedy 12 slots" timeout 150 $S batch-test --max-tokens 24 --model $M/l8b.gguf --devices cuda:0 \
  --parallel 12
for m in "STRATA_Q4K_PF=0" "STRATA_DECODE_KERNEL=dp4a" "STRATA_Q4K_PF=1" "STRATA_Q4K_PF=0"; do
  check "bench 8b 1,8 $m" env $m timeout 100 $S bench --model $M/l8b.gguf --streams 1,8 --parallel 8 $B
done
check "bench smol 1,8" timeout 100 $S bench --model $M/smol.gguf --streams 1,8 --parallel 8 $B
summary
