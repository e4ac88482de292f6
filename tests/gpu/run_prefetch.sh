#!/usr/bin/env bash
# Issue 11, session 13: the int8 kernel loading each step's next weight units before its dot products
# (STRATA_DP4A_PF=1: two sets of weight registers, 80 against 64 at one row, 150 against 122 at four rows a
# pass; the same bits). The kernel alone at 1-16 rows (PF 0 and 1), then end to end at PF 1 with
# exactness. Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
l8b_and_smol
for pf in 0 1; do
  check "kernel pf $pf" env STRATA_DP4A_PF=$pf timeout 150 python3 tests/gpu/bench_matmul.py --no-checks --only llama-3-8b \
    --matrices "gate|up,down,qkv,wo"
done
B="--prompt-tokens 512 --max-tokens 128 --ctx 2048 --devices cuda:0 --parallel 8"
check "batch-test 8b sampled 4 slots pf 1" env STRATA_DP4A_PF=1 timeout 120 $S batch-test --max-tokens 24 \
  --model $M/l8b.gguf --devices cuda:0 --parallel 4 --temperature 0.8 --seed 4
check "bench 8b 1,4,8 pf 1" env STRATA_DP4A_PF=1 timeout 120 $S bench --model $M/l8b.gguf --streams 1,4,8 $B
check "bench smol 1 pf 1" env STRATA_DP4A_PF=1 timeout 80 $S bench --model $M/smol.gguf --streams 1 $B
summary
