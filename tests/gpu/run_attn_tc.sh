#!/usr/bin/env bash
# Next session's first call (issue 14, long-context decode): the decode tiles' split attention on the tensor
# cores with a program per KV head (STRATA_ATTN_TC=1, written 2026-12-04, never run on a GPU) against the
# committed program per query head. Attention tests under CUDA (the tensor-core form to 3e-2 against torch
# on bfloat16-rounded inputs, a row alone the same bits, fused = split + merge); the kernels alone
# (bench_attention.py); the 8B shape at 6,000 positions (1 and 4 streams) and at short contexts (1 and 8)
# with it off and on; batch-tests with it on (long prompts + follow-up sampled, two stages two groups,
# SmolLM2's group of 3, the counting model with piped MTP, the small MoE's long prompts with a follow-up);
# the MoE kernels' tests too (the grouped launches' 2 stages had no MoE batch-test on a GPU).
set -euo pipefail
source "$(dirname "$0")/env.sh"
check "kernel tests" timeout 200 python3 -m pytest -q -p no:cacheprovider tests/engine/test_attention_kernel.py \
  tests/engine/test_moe_gemv.py tests/engine/test_gpu_kernels.py -k "flash or split or fast_block or moe"
check "attention alone" timeout 150 python3 tests/gpu/bench_attention.py
l8b_and_smol
P="timeout 120 $S bench --model $M/l8b.gguf --devices cuda:0 --max-tokens 64 --parallel 4 --streams 1,4 --prompt-tokens 6000 --ctx 8192"
for tc in 0 1; do
  check "8b at 6000 positions (tc $tc)" env STRATA_ATTN_TC=$tc $P
  check "8b decode 1,8 (tc $tc)" env STRATA_ATTN_TC=$tc timeout 120 $S bench --model $M/l8b.gguf $B --streams 1,8 --parallel 8
done
export STRATA_ATTN_TC=1
check "batch-test 8b prompts 2000-6000 + follow-up, sampled (tc)" timeout 150 $S batch-test --max-tokens 16 \
  --follow-up --model $M/l8b.gguf --devices cuda:0 --parallel 4 --prompt-tokens 2000-6000 --ctx 8192 \
  --temperature 0.8 --seed 5
exact_layouts
check "batch-test moe small prompts 500-1500 + follow-up, sampled (tc)" timeout 100 $S batch-test --max-tokens 16 \
  --follow-up --model $M/qwen3moe.gguf --devices cuda:0 --parallel 3 --prompt-tokens 500-1500 --ctx 2048 \
  --temperature 0.8 --seed 2
summary
