#!/usr/bin/env bash
# Issue 13: where a window's time goes when MTP drafts are on (llama-3-8b shape with an MTP layer, one
# stream: drafts off, then --spec 4, the drafter's parts timed and the top GPU kernels); and issue 11:
# the 1-row and 8-row decode tiles kernel by kernel.
set -euo pipefail
source "$(dirname "$0")/env.sh"
$S make-model --arch llama --shape llama-3-8b --mtp 1 --qtype Q4_K --out $M/l8m.gguf >/dev/null
check "host profile 8b+mtp, drafts off" timeout 150 python3 tests/gpu/profile_host.py $M/l8m.gguf 40
check "host profile 8b+mtp, spec 4" env SPEC=4 timeout 150 python3 tests/gpu/profile_host.py $M/l8m.gguf 40
check "decode tiles 8b" timeout 150 python3 tests/gpu/profile_stage.py $M/l8m.gguf 1 8
summary
