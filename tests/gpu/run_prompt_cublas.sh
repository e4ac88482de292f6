#!/usr/bin/env bash
# Issue 14: prompt tiles through one dequantizing kernel per weight and torch.mm (STRATA_PROMPT_KERNEL=cublas)
# against the tensor-core kernel (mma): kernel tests under CUDA, batch-test IDENTICAL (prompt rows in
# shared tiles against alone), 512- and 4096-token prompts on the llama-3-8b shape at prompt tiles 128
# and 512.
set -euo pipefail
source "$(dirname "$0")/env.sh"
check "kernel tests" timeout 150 python3 -m pytest -q -p no:cacheprovider -x tests/engine/test_packed.py
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
export STRATA_PROMPT_KERNEL=cublas
check "batch-test 8b cublas prompts" timeout 150 $S batch-test --model $M/l8b.gguf --devices cuda:0 --parallel 4 \
  --max-tokens 8
for tile in ${TILES:-128 512}; do
  export STRATA_PROMPT_TILE=$tile
  check "prompt 512 (cublas, tile $tile)" timeout 120 $S bench --model $M/l8b.gguf --devices cuda:0 --streams 1 \
    --prompt-tokens 512 --max-tokens 16 --ctx 2048
  check "prompt 4096 (cublas, tile $tile)" timeout 150 $S bench --model $M/l8b.gguf --devices cuda:0 --streams 1 \
    --prompt-tokens 4096 --max-tokens 16 --ctx 8192
done
summary
