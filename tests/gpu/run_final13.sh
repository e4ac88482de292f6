#!/usr/bin/env bash
# Session 13's exactness pass after the host trims (hidden rows, chained tokens and graph-made logits as
# slices; the chain's picks reused by the verdicts), the pass's row skip and the MoE XS default: two stages
# on one GPU (non-default split, 2 groups, sampled), the counting model with piped MTP 3 on two stages, the
# 8B shape with an MTP layer at spec 4 (greedy), the MoE small model (spec 3, sampled), SmolLM2 sampled;
# then the reference benches of the README table (8B and SmolLM2 shapes, 1 and 8 streams). Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
l8b_and_smol
$S make-model --arch llama --shape llama-3-8b --mtp 1 --qtype Q4_K --out $M/l8m.gguf >/dev/null
exact_layouts
check "batch-test 8b+mtp spec 4 greedy" timeout 150 $S batch-test --max-tokens 24 --model $M/l8m.gguf --devices cuda:0 \
  --parallel 3 --draft mtp --spec 4
B="--prompt-tokens 512 --max-tokens 128 --ctx 2048 --devices cuda:0 --streams 1,8 --parallel 8"
check "bench smol 1,8" timeout 80 $S bench --model $M/smol.gguf $B
check "bench 8b 1,8" timeout 120 $S bench --model $M/l8b.gguf $B
summary
