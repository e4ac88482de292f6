#!/usr/bin/env bash
# Issue 13: what drafts buy on the GPU at a set acceptance (the replay draft source: each request's own
# tokens from a first run, kept with probability P), on the llama-3-8b shape with an MTP layer (Q4_K):
# no drafts, serial batch MTP (--spec 4) and, where two stages fit, piped MTP 3 in 2 groups, at 1 and 4
# streams; batch-test IDENTICAL first. P: $ACCEPT (default 0.7). DEV2: the two stages' devices
# (default cuda:0,cuda:1 with two GPUs, else none: the piped run is left out).
set -euo pipefail
source "$(dirname "$0")/env.sh"
NGPU=$(python3 -c 'import torch; print(torch.cuda.device_count())')
DEV2=${DEV2:-}; [ -z "$DEV2" ] && [ "$NGPU" -ge 2 ] && DEV2=cuda:0,cuda:1
P=${ACCEPT:-0.7}
$S make-model --arch llama --shape llama-3-8b --mtp 1 --qtype Q4_K --out $M/l8m.gguf >/dev/null
check "batch-test 8b+mtp replay spec 4" timeout 150 $S batch-test --model $M/l8m.gguf --devices cuda:0 --parallel 4 \
  --max-tokens 16 --draft replay --spec 4
B="timeout 200 $S bench --model $M/l8m.gguf --streams 1,4 --parallel 4 --max-tokens 96 --ctx 1024"
check "bench no drafts" $B --devices cuda:0
check "bench replay $P spec 4" $B --devices cuda:0 --draft replay --spec 4 --replay-accept $P
if [ -n "$DEV2" ]; then
  check "bench $DEV2 2 groups, no drafts" $B --devices $DEV2 --batch-groups 2
  check "bench $DEV2 2 groups, replay $P piped 3" $B --devices $DEV2 --batch-groups 2 --draft replay --piped-mtp 3 \
    --replay-accept $P
fi
summary
