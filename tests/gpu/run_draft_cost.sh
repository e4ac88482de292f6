#!/usr/bin/env bash
# Issue 17, "a lone request never slower with drafts on": where a draft window's time goes on the default
# model's shape (smollm2-135m Q4_1 with an MTP layer, random weights: nearly every proposal is rejected,
# but the drafter runs its whole chain each window). Before (run_mtp_train.sh c, the trained layer,
# 2026-12-04): one stream's window 0.81 ms without drafts, 2.27 ms at --spec 4. Prints the host's parts
# and the GPU kernels per step for drafts off, --spec 2 and --spec 4, then strata bench solo at each.
set -euo pipefail
source "$(dirname "$0")/env.sh"
$S make-model --arch llama --shape smollm2-135m --mtp 1 --qtype Q4_1 --out $M/smolm.gguf >/dev/null
for spec in ${PROFILE_SPECS-1 2 4}; do
  check "host profile smol+mtp spec $spec" env SPEC=$spec timeout 150 python3 tests/gpu/profile_host.py $M/smolm.gguf 100
done
check "chaining tests" tail_of 60 timeout 300 python3 -m pytest -q -p no:cacheprovider -x tests/engine/test_chaining.py \
  tests/engine/test_draft_guard.py
for spec in 2 4; do
  check "bench smol+mtp spec $spec, no guard" env STRATA_DRAFT_GUARD=0 timeout 120 $S bench --model $M/smolm.gguf \
    --streams 1 --parallel 1 --spec $spec --prompt-tokens 64 --max-tokens 256 --ctx 1024 --devices cuda:0
done
for spec in 1 2 4; do
  check "bench smol+mtp spec $spec" timeout 120 $S bench --model $M/smolm.gguf --streams 1 --parallel 1 --spec $spec \
    --prompt-tokens 64 --max-tokens 1024 --ctx 2048 --devices cuda:0
done
summary
