#!/usr/bin/env bash
# Issues 12/13/17, session 13: where a window goes with MTP drafts on the 8B shape (host parts and the
# decode tile at 1, 4 and 8 real rows: what a 4-row verify window costs against a 1-row one), then the
# MoE part of run_depth_xs.sh (the pair kernel at one and two weight rows per x load). Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
$S make-model --arch llama --shape llama-3-8b --mtp 1 --qtype Q4_K --out $M/l8m.gguf >/dev/null
check "host profile 8b+mtp, drafts off" timeout 150 python3 tests/gpu/profile_host.py $M/l8m.gguf 40
check "host profile 8b+mtp, spec 4" env SPEC=4 timeout 150 python3 tests/gpu/profile_host.py $M/l8m.gguf 40
check "decode tiles 8b at 1, 2, 4, 8 rows" timeout 150 python3 tests/gpu/profile_stage.py $M/l8m.gguf 1 2 4 8
rm -f $M/l8m.gguf
OUT=$OUT/moe NO_CHAIN=1 NO_DRAFTS=1 bash tests/gpu/run_depth_xs.sh > /dev/null 2>&1 || FAILED+=("moe part (moe/log.txt)")
tail -n 40 $OUT/moe/log.txt
summary
