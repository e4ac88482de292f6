#!/usr/bin/env bash
# Issue 17: the drafter's catch-up with its proposals in one replay and a chain's later steps in one more
# (engine.draft_graph chainN). Before (run_draft_cost.sh, 2026-12-04, smollm2-135m shape with a random MTP
# layer, one stream, no guard): window 2.14 ms at --spec 2, 2.78 at --spec 4; the drafter's host part 525 /
# 834 us a window. Prints the host parts at --spec 4, benches without the guard, and exactness with drafts.
# First run (2026-12-04): windows 1.83 ms at --spec 2 (548 tok/s, was 468), 2.10 ms at --spec 4 (476, was 360);
# batch-tests IDENTICAL. Its host profile ran with the guard on, which paused the drafts (profile_host.py now
# turns the guard off where SPEC > 1).
set -euo pipefail
source "$(dirname "$0")/env.sh"
$S make-model --arch llama --shape smollm2-135m --mtp 1 --qtype Q4_1 --out $M/smolm.gguf >/dev/null
$S make-model --arch llama --shape small --mtp 1 --weights counting --out $M/count.gguf >/dev/null
$S make-model --arch qwen3moe --shape small --mtp 1 --qtype Q4_K --out $M/moe.gguf >/dev/null
check "host profile smol+mtp spec 4" env SPEC=4 timeout 150 python3 tests/gpu/profile_host.py $M/smolm.gguf 100
for spec in 2 4; do
  check "bench smol+mtp spec $spec, no guard" env STRATA_DRAFT_GUARD=0 timeout 120 $S bench --model $M/smolm.gguf \
    --streams 1 --parallel 1 --spec $spec --prompt-tokens 64 --max-tokens 256 --ctx 1024 --devices cuda:0
done
bt="timeout 150 $S batch-test --max-tokens 24"
check "batch-test counting spec 4 solo" $bt --model $M/count.gguf --devices cuda:0 --parallel 1 --spec 4
check "batch-test counting cuda:0,cuda:0 piped 3" $bt --model $M/count.gguf --devices cuda:0,cuda:0 --parallel 4 \
  --batch-groups 2 --piped-mtp 3
check "batch-test moe spec 3 sampled" $bt --model $M/moe.gguf --devices cuda:0 --parallel 4 --draft mtp --spec 3 \
  --temperature 0.8 --seed 3
check "batch-test smol+mtp spec 4 sampled" $bt --model $M/smolm.gguf --devices cuda:0 --parallel 3 --spec 4 \
  --temperature 0.8 --seed 2
summary
