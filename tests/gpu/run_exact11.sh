#!/usr/bin/env bash
# Issue 11: exactness only (no benches, no kernel tests): batch-test on the llama-3-8b shape with the bf16
# decode kernel at 8 slots, greedy dp4a on 1 GPU, the counting model with piped MTP 3 on two stages, the
# MoE small model with MTP spec 3 (two stages on cuda:0 where there is one GPU).
set -euo pipefail
source "$(dirname "$0")/env.sh"
NGPU=$(python3 -c 'import torch; print(torch.cuda.device_count())')
DEV2=cuda:0,cuda:1; [ "$NGPU" -ge 2 ] || DEV2=cuda:0,cuda:0
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
$S make-model --arch llama --shape small --mtp 1 --weights counting --out $M/count.gguf >/dev/null
$S make-model --arch qwen3moe --shape small --mtp 1 --qtype Q4_K --out $M/moe.gguf >/dev/null
BT="timeout 150 $S batch-test --max-tokens 16"
check "batch-test 8b bf16 parallel 8 sampled" $BT --model $M/l8b.gguf --devices cuda:0 --parallel 8 --temperature 0.8 \
  --seed 3 --decode-kernel bf16
check "batch-test 8b 1 GPU greedy" $BT --model $M/l8b.gguf --devices cuda:0 --parallel 4
check "batch-test counting $DEV2 piped 3" $BT --model $M/count.gguf --devices $DEV2 --parallel 4 --batch-groups 2 \
  --piped-mtp 3
check "batch-test moe spec 3 sampled" $BT --model $M/moe.gguf --devices cuda:0 --parallel 4 --draft mtp --spec 3 \
  --temperature 0.8 --seed 3
summary
