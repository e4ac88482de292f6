#!/usr/bin/env bash
# The 2-stage sampled mismatch seen on 2026-12-01 (H200, stages cuda:0,cuda:0 split 12, 2 groups, T 0.7
# seed 5, 16 tokens: one slot DIFFERS at its last token, logits max|diff| 0.12; greedy IDENTICAL): the same
# check under each switch that changes how a window runs, so one call says which part it follows.
# carry [".whl"]; on two GPUs DEV2=cuda:0,cuda:1 checks the real split too.
set -euo pipefail
source "$(dirname "$0")/env.sh"
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
D=${DEV2:-cuda:0,cuda:0}
BT="timeout 120 $S batch-test --model $M/l8b.gguf --parallel 4 --temperature 0.7 --seed 5"
check "as seen: $D split 12, 2 groups, 16 tokens" $BT --devices $D --layer-split 12 --batch-groups 2 --max-tokens 16
check "24 tokens (does the mismatch move to the end?)" $BT --devices $D --layer-split 12 --batch-groups 2 --max-tokens 24
check "seed 6" $BT --devices $D --layer-split 12 --batch-groups 2 --max-tokens 16 --seed 6
check "one group" $BT --devices $D --layer-split 12 --batch-groups 1 --max-tokens 16
check "one stage, 2 groups" $BT --devices cuda:0 --batch-groups 2 --max-tokens 16
check "no split attention" env STRATA_ATTN_SPLIT=0 $BT --devices $D --layer-split 12 --batch-groups 2 --max-tokens 16
check "no CUDA graphs" env STRATA_CUDA_GRAPHS=0 $BT --devices $D --layer-split 12 --batch-groups 2 --max-tokens 16
check "no fused block" env STRATA_FUSED_BLOCK=0 $BT --devices $D --layer-split 12 --batch-groups 2 --max-tokens 16
check "greedy on the same layout" $BT --devices $D --layer-split 12 --batch-groups 2 --max-tokens 16 --temperature 0
summary
