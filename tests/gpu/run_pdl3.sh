#!/usr/bin/env bash
# Issue 11 / 12, session 14: programmatic dependent launch at its defaults (1024 bytes a weight row
# prefetched) on the qwen3-30b-a3b MoE shape against PDL off, where a SmolLM2 step's host time goes now that
# its GPU replay (~750 us) is shorter than the step, and the README table's benches at the defaults.
# Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
l8b_and_smol
$S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype Q4_K --out $M/q30.gguf >/dev/null
for p in 0 1; do
  check "bench q30 1,8 pdl $p" env STRATA_PDL=$p timeout 200 $S bench --model $M/q30.gguf --streams 1,8 --parallel 8 $B
done
check "host parts smol" timeout 100 python3 tests/gpu/profile_host.py $M/smol.gguf 200
check "bench smol 1,8" timeout 120 $S bench --model $M/smol.gguf --streams 1,8 --parallel 8 $B
check "bench 8b 1,2,4,8" timeout 200 $S bench --model $M/l8b.gguf --streams 1,2,4,8 --parallel 8 $B
summary
