#!/usr/bin/env bash
# Issue 11, session 14, after run_pdl.sh (SmolLM2 one stream 935-1,000 -> 1,122 tok/s, eight 4,835 -> 5,549 with
# programmatic dependent launch, but the 8B shape 451 -> 433 / 1,390 -> 1,342): is it the weight prefetch
# before the wait (STRATA_PDL_PREFETCH bytes a weight row: all, 1024, 0)? Decode tile replay times of the 8B
# shape (1 and 8 real rows; GPU only, no host) at each setting with PDL off before and after, then benches.
# Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
l8b_and_smol
prof() { tail_of 40 "$@" | grep -E "^== |_kernel|Memcpy" | head -40; }
for cfg in "STRATA_PDL=0" "STRATA_PDL=1" "STRATA_PDL_PREFETCH=1024" "STRATA_PDL_PREFETCH=0" "STRATA_PDL=0"; do
  check "decode tiles 8b $cfg" prof env $cfg timeout 100 python3 tests/gpu/profile_stage.py $M/l8b.gguf 1 8
done
for cfg in "STRATA_PDL=0" "STRATA_PDL_PREFETCH=0" "STRATA_PDL_PREFETCH=1024" "STRATA_PDL=1"; do
  check "bench 8b 1,8 $cfg" env $cfg timeout 120 $S bench --model $M/l8b.gguf --streams 1,8 --parallel 8 $B
done
check "bench smol 1,8 STRATA_PDL_PREFETCH=0" env STRATA_PDL_PREFETCH=0 timeout 120 $S bench --model $M/smol.gguf \
  --streams 1,8 --parallel 8 $B
summary
