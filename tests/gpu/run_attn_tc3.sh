#!/usr/bin/env bash
# Issue 14: the tensor-core split attention as the default (KV groups of 4+, heads <= 128 values): the
# exactness layouts and the 8B long prompts with a follow-up at the default; heads of 256 values (gemma3-270m
# shape) with it forced on and off (kernels alone, strata bench) before the rule takes them in.
set -euo pipefail
source "$(dirname "$0")/env.sh"
l8b_and_smol
check "batch-test 8b prompts 2000-6000 + follow-up, sampled" timeout 150 $S batch-test --max-tokens 16 \
  --follow-up --model $M/l8b.gguf --devices cuda:0 --parallel 4 --prompt-tokens 2000-6000 --ctx 8192 \
  --temperature 0.8 --seed 5
exact_layouts
check "attention alone, gemma3-270m heads" timeout 100 python3 tests/gpu/bench_attention.py --shapes gemma3-270m
$S make-model --arch gemma3 --shape gemma3-270m --qtype Q4_K --out $M/g270.gguf >/dev/null
for tc in 0 1; do
  check "gemma3-270m decode 1,8 (tc $tc)" env STRATA_ATTN_TC=$tc timeout 100 $S bench --model $M/g270.gguf $B \
    --streams 1,8 --parallel 8
done
check "batch-test gemma3-270m 4 slots sampled, 1500-token prompts + follow-up (tc 1)" env STRATA_ATTN_TC=1 \
  timeout 120 $S batch-test --max-tokens 16 --follow-up --model $M/g270.gguf --devices cuda:0 --parallel 4 \
  --prompt-tokens 600-1500 --ctx 2048 --temperature 0.8 --seed 3
summary
