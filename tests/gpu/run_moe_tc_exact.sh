#!/usr/bin/env bash
# Issue 12 / 14: the qwen3-30b-a3b shape exact with the tensor-core split attention (its KV groups of 8 take it
# by default): long prompts with a follow-up turn, sampled, and eight slots greedy.
set -euo pipefail
source "$(dirname "$0")/env.sh"
$S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype Q4_K --out $M/q30.gguf >/dev/null
check "batch-test 30b prompts 1000-4000 + follow-up, sampled" timeout 150 $S batch-test --max-tokens 16 \
  --follow-up --model $M/q30.gguf --devices cuda:0 --parallel 4 --prompt-tokens 1000-4000 --ctx 8192 \
  --temperature 0.8 --seed 6
check "batch-test 30b 8 slots greedy" timeout 100 $S batch-test --max-tokens 24 --model $M/q30.gguf --devices cuda:0 \
  --parallel 8
summary
