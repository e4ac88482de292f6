#!/usr/bin/env bash
# Issue 11, written in session 13 for the next: the split decode attention merging its chunks in its last
# chunk program (STRATA_ATTN_FUSED=1: one launch a layer less; SmolLM2's one stream is held by its ~300
# launches a token), and the int8 kernel's prefetch on 1-row tiles only (STRATA_DP4A_PF=solo; bits equal by
# construction, so batch-test's lone requests with it against batched ones without it must stay IDENTICAL):
# the attention and dp4a kernel tests under CUDA, the layer microbenchmark, batch-tests, then SmolLM2 and
# 8B benches. Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "attention + dp4a kernel tests" timeout 200 python3 -m pytest -q -p no:cacheprovider -x \
  tests/engine/test_attention_kernel.py tests/engine/test_dp4a_gemv.py
l8b_and_smol
for f in 0 1; do
  check "attention alone fused $f" env STRATA_ATTN_FUSED=$f timeout 150 python3 tests/gpu/bench_attention.py
done
check "batch-test 8b sampled 4 slots fused" env STRATA_ATTN_FUSED=1 $BT --model $M/l8b.gguf --devices cuda:0 --parallel 4 \
  --temperature 0.8 --seed 4
check "batch-test smol greedy 3 slots fused" env STRATA_ATTN_FUSED=1 $BT --model $M/smol.gguf --devices cuda:0 --parallel 3
for f in 0 1; do
  check "bench smol 1,8 fused $f" env STRATA_ATTN_FUSED=$f timeout 80 $S bench --model $M/smol.gguf --streams 1,8 --parallel 8 $B
  check "bench 8b 1,8 fused $f" env STRATA_ATTN_FUSED=$f timeout 120 $S bench --model $M/l8b.gguf --streams 1,8 --parallel 8 $B
done
check "batch-test 8b sampled 4 slots, prefetch on 1-row tiles" env STRATA_DP4A_PF=solo $BT --model $M/l8b.gguf \
  --devices cuda:0 --parallel 4 --temperature 0.8 --seed 4
check "bench 8b 1,8 prefetch on 1-row tiles" env STRATA_DP4A_PF=solo timeout 120 $S bench --model $M/l8b.gguf \
  --streams 1,8 --parallel 8 $B
check "decode tiles smol fused" env STRATA_ATTN_FUSED=1 timeout 100 python3 tests/gpu/profile_stage.py $M/smol.gguf 1 8
summary
