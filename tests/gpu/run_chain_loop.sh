#!/usr/bin/env bash
# Issue 11, session 12: chained windows that wait for their successor while their kernels run (the device
# no longer runs dry between one stream's windows), and the int8 decode kernel with two weight rows per
# x load (STRATA_DP4A_XS=2), end to end on the 8B and SmolLM2 shapes and in bench_matmul (--sweep-xs);
# Nsight Compute on a decode kernel at one row (NCU="dp4a bf16"). Everything also lands in $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "dp4a tests on GPU" timeout 150 python3 -m pytest -q -p no:cacheprovider -x tests/engine/test_dp4a_gemv.py
[ -n "${NO_SWEEP:-}" ] || check "dp4a xs sweep 8b" timeout 200 python3 tests/gpu/bench_matmul.py --no-checks --only llama-3-8b \
  --sweep-xs --matrices "gate|up,down,qkv,wo" --json "$OUT/xs.json"
[ -n "${NO_SWEEP:-}" ] || check "dp4a xs sweep smol" timeout 100 python3 tests/gpu/bench_matmul.py --no-checks --only smollm2-135m \
  --sweep-xs --matrices "gate|up"
if [ -z "${NO_E2E:-}" ]; then
  l8b_and_smol
  BT="timeout 150 $S batch-test --max-tokens 24"
  B="--prompt-tokens 512 --max-tokens 128 --ctx 2048 --devices cuda:0"
  for xs in ${XS:-1 2}; do
    export STRATA_DP4A_XS=$xs
    check "batch-test 8b greedy parallel 4 (chained windows) xs $xs" $BT --model $M/l8b.gguf --devices cuda:0 --parallel 4
    check "batch-test smol sampled parallel 3 xs $xs" $BT --model $M/smol.gguf --devices cuda:0 --parallel 3 \
      --temperature 0.8 --seed 3
    check "bench 8b 1,8 xs $xs" timeout 200 $S bench --model $M/l8b.gguf --streams 1,8 --parallel 8 $B
    check "bench smol 1,8 xs $xs" timeout 100 $S bench --model $M/smol.gguf --streams 1,8 --parallel 8 $B
  done
  unset STRATA_DP4A_XS
fi
for kern in ${NCU:-}; do
  check "ncu $kern gate|up 1 row" timeout 120 ncu --clock-control none -k regex:"$kern" --launch-skip 4 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy \
    env KERNEL=$kern ROWS=1 python3 tests/gpu/ncu_imma.py
done
summary
