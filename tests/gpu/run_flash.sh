#!/usr/bin/env bash
# Issue 14 (and 12's prompts) on one GPU: prompt tiles' attention on the tensor cores (flash kernel) and the
# MoE grouped launches at their new block sizes. Kernel tests under CUDA; batch-test IDENTICAL with long
# prompts and a follow-up turn that reuses each slot's prefix (8B shape on one and on two stages, gemma3's
# sliding window, the MoE small model), the usual layouts; then where a prompt tile's time goes and the
# prompt / read-beside figures on the llama-3-8b and qwen3-30b-a3b shapes. FLASH0=1: the same benches
# with STRATA_ATTN_FLASH=0 too.
set -euo pipefail
source "$(dirname "$0")/env.sh"
check "kernel tests" timeout 240 python3 -m pytest -q -p no:cacheprovider tests/engine/test_attention_kernel.py \
  tests/engine/test_moe_gemv.py tests/engine/test_gpu_kernels.py
l8b_and_smol
LB="timeout 200 $S batch-test --max-tokens 16 --follow-up"
check "batch-test 8b prompts 2000-8000 + follow-up, sampled" $LB --model $M/l8b.gguf --devices cuda:0 --parallel 4 \
  --prompt-tokens 2000-8000 --ctx 10240 --temperature 0.8 --seed 5
check "batch-test 8b 2 stages 2 groups prompts 600-3000 + follow-up" $LB --model $M/l8b.gguf --devices cuda:0,cuda:0 \
  --layer-split 14 --parallel 4 --batch-groups 2 --prompt-tokens 600-3000 --ctx 4096 --temperature 0.8 --seed 6
check "batch-test gemma3 tiny (window 16) prompts 300-900 + follow-up" $LB --model $M/gemma3.gguf --devices cuda:0 \
  --parallel 3 --prompt-tokens 300-900 --ctx 2048
check "batch-test moe small prompts 500-1500 + follow-up, spec 3 sampled" $LB --model $M/qwen3moe.gguf \
  --devices cuda:0 --parallel 3 --prompt-tokens 500-1500 --ctx 2048 --draft mtp --spec 3 --temperature 0.8 --seed 2
exact_layouts
P="timeout 150 $S bench --devices cuda:0 --streams 1 --max-tokens 8"
for f in 1 ${FLASH0:+0}; do
  export STRATA_ATTN_FLASH=$f
  check "prompt tile profile 8b (flash $f)" timeout 120 python3 tests/gpu/profile_stage.py $M/l8b.gguf prompt
  check "8b prompt 512 (flash $f)" $P --model $M/l8b.gguf --prompt-tokens 512 --ctx 2048
  check "8b prompt 4096 (flash $f)" $P --model $M/l8b.gguf --prompt-tokens 4096 --ctx 4608
done
export STRATA_ATTN_FLASH=1
check "8b read 16000 beside a stream" timeout 200 $S bench --model $M/l8b.gguf --devices cuda:0 --streams 1 \
  --max-tokens 16 --prompt-tokens 64 --ctx 16640 --read-beside 16000
check "8b decode 1,8" timeout 150 $S bench --model $M/l8b.gguf $B --streams 1,8 --parallel 8
rm -f $M/l8b.gguf
$S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype Q4_K --out $M/q30.gguf >/dev/null
check "prompt tile profile 30b-a3b" timeout 120 python3 tests/gpu/profile_stage.py $M/q30.gguf prompt
check "30b-a3b prompt 512" $P --model $M/q30.gguf --prompt-tokens 512 --ctx 2048
check "30b-a3b prompt 4096" $P --model $M/q30.gguf --prompt-tokens 4096 --ctx 4608
check "batch-test 30b-a3b prompts 1000-3000 + follow-up" $LB --model $M/q30.gguf --devices cuda:0 --parallel 2 \
  --prompt-tokens 1000-3000 --ctx 4096
summary
