#!/usr/bin/env bash
# Issue 11 (eight streams, Q4_K at 1-16 rows): the int8 decode kernel's tensor-core twin
# (engine/kernels/dp4a_mma.py, STRATA_DP4A_MMA=1: tiles of 2+ rows on int8 MMA, a 1-row tile on the int8
# kernel, the same bits). Session 14's QUICK run of its first build (a lane step's units in one batched
# MMA): bits equal on the H200, slow (gate|up 16 rows 113 us against the int8 kernel's 136, eight 8B
# streams 1,003 against 1,333); the lane-by-lane build after it is not yet run. First its bits against the int8 kernel's on the GPU (tests/engine/test_dp4a_mma.py
# and the block test), then the matmul microbenchmark (--sweep-dmma: some weight rows a program and
# warps), batch-tests with it on (lone requests on the int8 kernel against batched ones on the twin), and
# benches off / on. QUICK=1: the bit checks, one batch-test, the 8B matrices and one bench. Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "bits against the int8 kernel on the GPU" timeout 200 python3 -m pytest -q -p no:cacheprovider -x \
  tests/engine/test_dp4a_mma.py "tests/engine/test_gpu_kernels.py::test_packed_block_decode_tile_is_row_invariant_and_right"
MATS="gate|up,down,qkv,wo"
if [ "${QUICK:-0}" = 1 ]; then
  check "matmul 8b" timeout 200 python3 tests/gpu/bench_matmul.py --no-checks --only llama-3-8b --matrices "gate|up,down" \
    --sweep-dmma
  l8b_and_smol
  check "bench 8b 1,8 mma" env STRATA_DP4A_MMA=1 timeout 120 $S bench --model $M/l8b.gguf --streams 1,8 --parallel 8 $B
  check "batch-test 8b sampled 4 slots, mma" env STRATA_DP4A_MMA=1 $BT --model $M/l8b.gguf --devices cuda:0 \
    --parallel 4 --temperature 0.8 --seed 4
  summary
  exit 0
fi
l8b_and_smol
check "batch-test 8b sampled 4 slots, mma" env STRATA_DP4A_MMA=1 $BT --model $M/l8b.gguf --devices cuda:0 --parallel 4 \
  --temperature 0.8 --seed 4
check "matmul 8b + smol, sweep" timeout 300 python3 tests/gpu/bench_matmul.py --no-checks --sweep-dmma --matrices "$MATS"
check "batch-test 8b greedy 8 slots, mma" env STRATA_DP4A_MMA=1 $BT --model $M/l8b.gguf --devices cuda:0 --parallel 8
check "batch-test 8b 2 stages split 12, 2 groups, sampled, mma" env STRATA_DP4A_MMA=1 $BT --model $M/l8b.gguf \
  --devices cuda:0,cuda:0 --layer-split 12 --parallel 4 --batch-groups 2 --temperature 0.8 --seed 7
check "batch-test smol greedy 3 slots, mma" env STRATA_DP4A_MMA=1 $BT --model $M/smol.gguf --devices cuda:0 --parallel 3
for m in 0 1; do
  check "bench 8b 1,2,4,8 mma $m" env STRATA_DP4A_MMA=$m timeout 200 $S bench --model $M/l8b.gguf --streams 1,2,4,8 \
    --parallel 8 $B
  check "bench smol 1,8 mma $m" env STRATA_DP4A_MMA=$m timeout 120 $S bench --model $M/smol.gguf --streams 1,8 --parallel 8 $B
done
check "decode tiles 8b mma" env STRATA_DP4A_MMA=1 timeout 100 python3 tests/gpu/profile_stage.py $M/l8b.gguf 1 8
summary
