#!/usr/bin/env bash
# Issue 15, item 2: IQ3_S, IQ3_XXS, IQ2_XXS and IQ1_S on GPU stages as Q8_0's planes with float32 scales
# (engine.kernels.packed.RUN_INT8_TYPES: exact values, 9 bits per weight; before, a dense bfloat16 copy).
# Kernel tests under CUDA; batch-test IDENTICAL on the llama-3-8b shape in IQ3_S (sampled) and a MoE small
# model in IQ3_XXS (spec 3); decode and prompt benches of the 8B shape in IQ3_S and IQ3_XXS.
# carry the wheels and .whl/llama.gguf (the tokenizer make-model copies).
set -euo pipefail
source "$(dirname "$0")/env.sh"
check "kernel tests" timeout 400 python3 -m pytest -q -p no:cacheprovider -x tests/engine/test_packed.py \
  tests/engine/test_dp4a_gemv.py tests/engine/test_moe_gemv.py tests/engine/test_quant_iq.py
for q in IQ3_S IQ3_XXS; do
  $S make-model --arch llama --shape llama-3-8b --qtype $q --out $M/l8b-$q.gguf >/dev/null
done
$S make-model --arch qwen3moe --shape small --mtp 1 --qtype IQ3_XXS --out $M/moe-iq3.gguf >/dev/null
check "batch-test 8b IQ3_S sampled" timeout 150 $S batch-test --max-tokens 12 --model $M/l8b-IQ3_S.gguf \
  --devices cuda:0 --parallel 4 --temperature 0.8 --seed 3
check "batch-test moe IQ3_XXS spec 3" timeout 150 $S batch-test --max-tokens 12 --model $M/moe-iq3.gguf \
  --devices cuda:0 --parallel 4 --spec 3
for q in IQ3_S IQ3_XXS; do
  check "bench 8b $q" timeout 150 $S bench --model $M/l8b-$q.gguf --devices cuda:0 --streams 1,8 --parallel 8 \
    --prompt-tokens 512 --max-tokens 64 --ctx 2048
done
summary
