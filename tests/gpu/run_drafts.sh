#!/usr/bin/env bash
# Issue 13: MTP drafts on the GPU with the drafter's passes as CUDA graphs. batch-test IDENTICAL with
# drafts (counting model piped 3 in 2 stages, MoE spec 3 sampled, the llama-3-8b shape with an MTP layer
# and replayed drafts at spec 4); where a window's time goes at spec 4 (profile_host SPEC=4); then the
# 8B's decode with no drafts and with replayed drafts kept at $ACCEPT (default 0.7), 1 and 4 streams.
set -euo pipefail
source "$(dirname "$0")/env.sh"
NGPU=$(python3 -c 'import torch; print(torch.cuda.device_count())')
DEV2=cuda:0,cuda:1; [ "$NGPU" -ge 2 ] || DEV2=cuda:0,cuda:0
P=${ACCEPT:-0.7}
$S make-model --arch llama --shape small --mtp 1 --weights counting --out $M/count.gguf >/dev/null
$S make-model --arch qwen3moe --shape small --mtp 1 --qtype Q4_K --out $M/moe.gguf >/dev/null
$S make-model --arch llama --shape llama-3-8b --mtp 1 --qtype Q4_K --out $M/l8m.gguf >/dev/null
BT="timeout 150 $S batch-test --max-tokens 16"
check "batch-test counting $DEV2 piped 3" $BT --model $M/count.gguf --devices $DEV2 --parallel 4 --batch-groups 2 \
  --piped-mtp 3
check "batch-test counting spec 4, 3 slots" $BT --model $M/count.gguf --devices cuda:0 --parallel 3 --spec 4
check "batch-test moe spec 3 sampled" $BT --model $M/moe.gguf --devices cuda:0 --parallel 4 --draft mtp --spec 3 \
  --temperature 0.8 --seed 3
check "batch-test 8b+mtp replay spec 4" $BT --model $M/l8m.gguf --devices cuda:0 --parallel 4 --draft replay --spec 4
check "host profile 8b+mtp, spec 4" env SPEC=4 timeout 150 python3 tests/gpu/profile_host.py $M/l8m.gguf 40
B="timeout 200 $S bench --model $M/l8m.gguf --streams 1,4 --parallel 4 --max-tokens 96 --ctx 1024 --devices cuda:0"
check "bench no drafts" $B
check "bench replay $P spec 4" $B --draft replay --spec 4 --replay-accept $P
check "bench counting spec 4" timeout 100 $S bench --model $M/count.gguf --devices cuda:0 --streams 1,4 --parallel 4 \
  --max-tokens 96 --spec 4
summary
