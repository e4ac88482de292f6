#!/usr/bin/env bash
# Issue 11: the Q4_K tensor-core decode kernel (engine/kernels/q4k_mma.py) with programmatic dependent launch:
# its test, the 8B decode tile's kernels (1 and 8 rows), batch-tests across stages, groups and drafts with it
# on (the default decode kernel on sm_80+), and the 8B bench with it and with dp4a (STRATA_DECODE_KERNEL). Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "q4k_mma rows independent and right" timeout 150 python3 -m pytest -q -p no:cacheprovider -x \
  tests/engine/test_q4k_mma.py
l8b_and_smol
check "decode tile kernels 8b" timeout 150 python3 tests/gpu/profile_stage.py $M/l8b.gguf 1 8
bt="timeout 150 $S batch-test --max-tokens 24"
$S make-model --arch qwen3moe --shape small --mtp 1 --qtype Q4_K --out $M/moe.gguf >/dev/null
check "batch-test 8b cuda:0,cuda:0 split 12, 2 groups, sampled" $bt --model $M/l8b.gguf --devices cuda:0,cuda:0 \
  --layer-split 12 --parallel 4 --batch-groups 2 --temperature 0.8 --seed 7
check "batch-test moe spec 3 sampled" $bt --model $M/moe.gguf --devices cuda:0 --parallel 4 --draft mtp --spec 3 \
  --temperature 0.8 --seed 3
check "batch-test 8b greedy 12 slots" $bt --model $M/l8b.gguf --devices cuda:0 --parallel 12
for m in q4k-mma dp4a; do
  check "bench 8b 1,8 $m" env STRATA_DECODE_KERNEL=$m timeout 100 $S bench --model $M/l8b.gguf --streams 1,8 \
    --parallel 8 $B
done
summary
