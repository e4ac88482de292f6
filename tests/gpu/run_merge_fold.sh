#!/usr/bin/env bash
# Twenty-third session: _merge_row folded into _merge_heads (the CUDA-core split kernel's merge is the group
# merge over one head): GPU attention tests, bench_attention on SmolLM2's and the 8B's heads with the CUDA-core
# split kernel, the exact layouts, the SmolLM2 bench; then sampled decoding's cost on the SmolLM2 shape
# (mtp-train's text came at 1,650 tok/s over 32 streams): greedy, temperature 0.8, and 0.8 with top-p 0.95.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "gpu attention tests" tail_of 4 timeout 300 python3 -m pytest -q -p no:cacheprovider -x \
  tests/engine/test_attention_kernel.py tests/engine/test_gpu_kernels.py
check "bench_attention split kernel" env STRATA_ATTN_TC=0 timeout 120 python3 tests/gpu/bench_attention.py \
  --shapes smollm2-135m
l8b_and_smol
exact_layouts
check "bench smol 1,8" timeout 100 $S bench --model $M/smol.gguf --streams 1,8 --parallel 8 $B
for t in "--temperature 0" "--temperature 0.8" "--temperature 0.8 --top-p 0.95"; do
  check "bench smol 32 streams $t" timeout 120 $S bench --model $M/smol.gguf --streams 1,32 --parallel 32 \
    --prompt-tokens 64 --max-tokens 128 --ctx 1024 --devices cuda:0 $t
done
summary
