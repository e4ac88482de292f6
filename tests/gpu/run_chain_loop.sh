#!/usr/bin/env bash
# Issue 11, session 12: chained windows that wait for their successor while their kernels run (the device
# no longer runs dry between one stream's windows), end to end on the 8B and SmolLM2 shapes (dp4a, and
# bf16 at 528 / 1056 programs, 2 codes per asm call); the dp4a weight loop pipelined or unrolled
# (bench_matmul --sweep-loop); Nsight Compute on dp4a and bf16 at one row.
set -euo pipefail
source "$(dirname "$0")/env.sh"
if [ -z "${NO_E2E:-}" ]; then
  $S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
  $S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf >/dev/null
  BT="timeout 150 $S batch-test --max-tokens 24"
  check "batch-test 8b greedy parallel 4 (chained windows)" $BT --model $M/l8b.gguf --devices cuda:0 --parallel 4
  check "batch-test smol greedy parallel 2 (chained windows)" $BT --model $M/smol.gguf --devices cuda:0 --parallel 2
  B="--prompt-tokens 512 --max-tokens 128 --ctx 2048 --devices cuda:0"
  check "bench 8b 1,8 (dp4a)" timeout 200 $S bench --model $M/l8b.gguf --streams 1,8 --parallel 8 $B
  check "bench smol 1,8 (dp4a)" timeout 100 $S bench --model $M/smol.gguf --streams 1,8 --parallel 8 $B
  check "bench 8b 8 bf16 pack 2, 1056 programs" env STRATA_BF16_PACK=2 STRATA_BF16_TARGET=1056 timeout 200 \
    $S bench --model $M/l8b.gguf --streams 8 --parallel 8 $B --decode-kernel bf16
  check "host profile 8b" timeout 150 python3 tests/gpu/profile_host.py $M/l8b.gguf 60
fi
[ -n "${NO_SWEEP:-}" ] || check "dp4a loop sweep 8b" timeout 240 python3 tests/gpu/bench_matmul.py --no-checks --only llama-3-8b \
  --sweep-loop --matrices "gate|up,down,qkv,wo" --json "$OUT/loop.json"
[ -n "${NO_SWEEP:-}" ] || check "dp4a loop sweep smol" timeout 120 python3 tests/gpu/bench_matmul.py --no-checks --only smollm2-135m \
  --sweep-loop --matrices "gate|up,head"
for kern in ${NCU:-}; do
  check "ncu $kern gate|up 1 row" timeout 120 ncu --clock-control none -k regex:"$kern" --launch-skip 4 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy \
    env KERNEL=$kern ROWS=1 python3 tests/gpu/ncu_imma.py
done
summary
