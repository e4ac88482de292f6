#!/usr/bin/env bash
# Issue 14: long contexts on one GPU, llama-3-8b shape Q4_K. Decode at ~6K positions (1 and 4 streams) and
# a decode tile's kernels at position 6000, with the tile attention as it is and with its keys split
# into chunks (STRATA_ATTN_SPLIT=1: flash-decoding, off by default until this shows it pays); batch-test
# IDENTICAL with the split on; 4,096-token prompt reading.
set -euo pipefail
source "$(dirname "$0")/env.sh"
check "attention tests" timeout 100 python3 -m pytest -q -p no:cacheprovider tests/engine/test_attention_kernel.py
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
check "batch-test 8b split attention" env STRATA_ATTN_SPLIT=1 timeout 150 $S batch-test --max-tokens 12 \
  --model $M/l8b.gguf --devices cuda:0 --parallel 4 --temperature 0.8 --seed 3
for split in 0 1; do
  export STRATA_ATTN_SPLIT=$split
  check "decode at 6K (split $split)" timeout 200 $S bench --model $M/l8b.gguf --devices cuda:0 --streams 1,4 \
    --parallel 4 --prompt-tokens 6000 --max-tokens 64 --ctx 8192
  check "tile at 6000 (split $split)" env POS=6000 timeout 150 python3 tests/gpu/profile_stage.py $M/l8b.gguf 1 4
done
summary
