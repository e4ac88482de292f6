#!/usr/bin/env bash
# The split decode attention (engine.kernels.attention, the default) at short and long contexts:
# attention tests under CUDA, batch-test IDENTICAL on the llama-3-8b shape (sampled, 4 slots), decode
# benches at ctx 1024 (8B and SmolLM2 shapes, 1 and 8 streams: where the keys fit one chunk) and at
# ~6K positions (8B, 1 and 4 streams), split against STRATA_ATTN_SPLIT=0 where SPLIT0=1.
set -euo pipefail
source "$(dirname "$0")/env.sh"
check "attention tests" timeout 100 python3 -m pytest -q -p no:cacheprovider tests/engine/test_attention_kernel.py
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
$S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf >/dev/null
check "batch-test 8b sampled" timeout 150 $S batch-test --max-tokens 16 --model $M/l8b.gguf --devices cuda:0 \
  --parallel 4 --temperature 0.8 --seed 3
for split in 1 ${SPLIT0:+0}; do
  export STRATA_ATTN_SPLIT=$split
  check "bench 8b 1,8 (split $split)" timeout 150 $S bench --model $M/l8b.gguf --devices cuda:0 --streams 1,8 \
    --parallel 8 --max-tokens 64 --ctx 1024
  check "bench smol 1,8 (split $split)" timeout 90 $S bench --model $M/smol.gguf --devices cuda:0 --streams 1,8 \
    --parallel 8 --max-tokens 128 --ctx 1024
  check "decode at 6K (split $split)" timeout 200 $S bench --model $M/l8b.gguf --devices cuda:0 --streams 1,4 \
    --parallel 4 --prompt-tokens 6000 --max-tokens 64 --ctx 8192
done
summary
