#!/usr/bin/env bash
# After run_flash.sh: the flash kernel's tests under CUDA, sampled long-prompt follow-ups on the MoE shape,
# the counting MoE model with piped MTP 1-3 on two stages, SmolLM2's shape (group of 3 heads) reading a
# prompt, and four 6,000-token prompts read and decoded together on the 8B shape (issue 14's long-context
# figures, on one GPU).
set -euo pipefail
source "$(dirname "$0")/env.sh"
check "kernel tests" timeout 240 python3 -m pytest -q -p no:cacheprovider tests/engine/test_attention_kernel.py \
  tests/engine/test_gpu_kernels.py -k "flash or row_invariant or fast_block"
l8b_and_smol
P="timeout 150 $S bench --devices cuda:0 --max-tokens 64"
check "smol prompt 512, 1 and 4 streams" $P --model $M/smol.gguf --streams 1,4 --parallel 4 --prompt-tokens 512 --ctx 2048
check "8b four 6000-token prompts" $P --model $M/l8b.gguf --streams 1,4 --parallel 4 --prompt-tokens 6000 --ctx 8192
check "8b four 6000-token prompts, 2 stages 2 groups" $P --model $M/l8b.gguf --devices cuda:0,cuda:0 --streams 4 \
  --parallel 4 --batch-groups 2 --prompt-tokens 6000 --ctx 8192
$S make-model --arch qwen3moe --shape small --mtp 1 --weights counting --out $M/cmoe.gguf >/dev/null
for d in 1 2 3; do
  check "batch-test counting moe 2 stages piped $d" timeout 120 $S batch-test --model $M/cmoe.gguf --max-tokens 24 \
    --devices cuda:0,cuda:0 --parallel 4 --batch-groups 2 --piped-mtp $d
done
rm -f $M/l8b.gguf
$S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype Q4_K --out $M/q30.gguf >/dev/null
check "batch-test 30b-a3b prompts 1000-4000 + follow-up, sampled" timeout 200 $S batch-test --model $M/q30.gguf \
  --devices cuda:0 --parallel 3 --prompt-tokens 1000-4000 --ctx 5120 --max-tokens 16 --follow-up --temperature 0.8 --seed 4
summary
