#!/usr/bin/env bash
# Issue 14: the tensor-core split attention for heads of 256 values too (KV groups of 4+): the kernels alone on
# gemma3-270m's heads, the hybrids' small shapes with it forced on (their groups of 2 leave it off by
# default), and the qwen3.5-9b shape (G 4, 256 values: now on by default) against run_gdn3.sh's figures
# (241.6 / 615.7 tok/s, same day) with its long prompts batch-tested.
set -euo pipefail
source "$(dirname "$0")/env.sh"
check "attention alone, gemma3-270m heads" timeout 100 python3 tests/gpu/bench_attention.py --shapes gemma3-270m
for a in qwen35moe qwen35; do
  $S make-model --arch $a --shape small --mtp 1 --qtype Q4_K --out $M/$a.gguf >/dev/null
  check "batch-test $a 2 stages piped 2 sampled (tc 1)" env STRATA_ATTN_TC=1 timeout 100 $S batch-test \
    --model $M/$a.gguf --devices cuda:0,cuda:0 --parallel 4 --batch-groups 2 --piped-mtp 2 --max-tokens 16 \
    --temperature 0.8 --seed 5
done
$S make-model --arch qwen35 --shape qwen3.5-9b --mtp 1 --qtype Q4_K --out $M/q35-9b.gguf >/dev/null
check "bench qwen3.5-9b shape" timeout 120 $S bench --model $M/q35-9b.gguf --devices cuda:0 --max-tokens 64 \
  --ctx 2048 --prompt-tokens 512 --streams 1,4 --parallel 4
check "batch-test qwen3.5-9b prompts 500-1800 sampled, spec 3" timeout 150 $S batch-test --model $M/q35-9b.gguf \
  --devices cuda:0 --parallel 4 --prompt-tokens 500-1800 --ctx 2048 --max-tokens 16 --draft mtp --spec 3 \
  --temperature 0.8 --seed 4
summary
