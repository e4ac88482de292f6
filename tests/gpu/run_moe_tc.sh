#!/usr/bin/env bash
# Issues 12 / 14: the qwen3-30b-a3b shape (KV groups of 8) with the tensor-core split attention (default) and
# without, one and eight streams at 512-token prompts and four at 6,000 positions; then where its prompt tile's
# time goes at the grouped launches' two stages (torch profiler).
set -euo pipefail
source "$(dirname "$0")/env.sh"
$S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype Q4_K --out $M/q30.gguf >/dev/null
for tc in auto 0; do
  check "30b decode 1,8 (tc $tc)" env STRATA_ATTN_TC=$tc timeout 100 $S bench --model $M/q30.gguf $B --streams 1,8 \
    --parallel 8
done
check "30b at 6000 positions, 4 streams (tc auto)" timeout 100 $S bench --model $M/q30.gguf --devices cuda:0 \
  --max-tokens 64 --parallel 4 --streams 4 --prompt-tokens 6000 --ctx 8192
check "profile 30b prompt tile" timeout 100 python3 tests/gpu/profile_stage.py $M/q30.gguf prompt
summary
