#!/usr/bin/env bash
# Decode tiles' split attention with a program per KV head (STRATA_ATTN_GROUP=1: each key block loaded once
# for the group's query heads) against a program per query head: the attention tests under CUDA, the
# kernels alone (bench_attention.py), the 8B shape decoding at 6,000 positions (1 and 4 streams) and at
# short contexts (1 and 8), batch-tests with it on; the 30B MoE shape's 512-token prompt (grouped launches
# at 2 stages).
set -euo pipefail
source "$(dirname "$0")/env.sh"
check "attention tests" timeout 120 python3 -m pytest -q -p no:cacheprovider tests/engine/test_attention_kernel.py
check "attention alone" timeout 150 python3 tests/gpu/bench_attention.py
l8b_and_smol
P="timeout 120 $S bench --model $M/l8b.gguf --devices cuda:0 --max-tokens 64 --parallel 4 --streams 1,4 --prompt-tokens 6000 --ctx 8192"
for g in 0 1; do check "8b at 6000 positions (group $g)" env STRATA_ATTN_GROUP=$g $P; done
export STRATA_ATTN_GROUP=1
check "8b decode 1,8 (group 1)" timeout 120 $S bench --model $M/l8b.gguf $B --streams 1,8 --parallel 8
check "batch-test 8b prompts 2000-6000 + follow-up, sampled (group 1)" timeout 150 $S batch-test --max-tokens 16 \
  --follow-up --model $M/l8b.gguf --devices cuda:0 --parallel 4 --prompt-tokens 2000-6000 --ctx 8192 \
  --temperature 0.8 --seed 5
check "batch-test 8b 2 stages 2 groups sampled (group 1)" timeout 120 $S batch-test --max-tokens 24 --model $M/l8b.gguf \
  --devices cuda:0,cuda:0 --layer-split 12 --parallel 4 --batch-groups 2 --temperature 0.8 --seed 7
check "batch-test smol sampled 3 slots (group 1)" timeout 100 $S batch-test --max-tokens 24 --model $M/smol.gguf \
  --devices cuda:0 --parallel 3 --temperature 0.8 --seed 2
rm -f $M/l8b.gguf
$S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype Q4_K --out $M/q30.gguf >/dev/null
check "30b-a3b prompt 512, decode 1" timeout 120 $S bench --model $M/q30.gguf $B --streams 1
summary
