#!/usr/bin/env bash
# Issue 11: the int8 decode kernel's x rows per pass (STRATA_DP4A_RB: each weight vector loaded once for
# 1, 2 or 4 rows). Kernel tests under CUDA; bench_matmul's checks (row-invariant at the default) and its
# times at each setting on the llama-3-8b and smollm2 shapes; batch-test IDENTICAL on the 8B (1 GPU,
# sampled, 8 slots); decode benches at each setting (8B 1 and 8 streams, SmolLM2 1 and 8).
set -euo pipefail
source "$(dirname "$0")/env.sh"
check "kernel tests" timeout 200 python3 -m pytest -q -p no:cacheprovider -x tests/engine/test_moe_gemv.py \
  tests/engine/test_dp4a_gemv.py
check "bench_matmul rb 8b" timeout 200 python3 tests/gpu/bench_matmul.py --sweep-rb --only llama-3-8b
check "bench_matmul rb smol" timeout 100 without "^check" python3 tests/gpu/bench_matmul.py --sweep-rb --only smollm2-135m
$S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf >/dev/null
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
check "batch-test 8b sampled 8 slots" timeout 150 $S batch-test --max-tokens 16 --model $M/l8b.gguf --devices cuda:0 \
  --parallel 8 --temperature 0.8 --seed 3
for rb in ${RBS:-4 1 2}; do
  export STRATA_DP4A_RB=$rb
  step "x rows per pass $rb"
  check "bench 8b 1,8 (rb $rb)" timeout 150 $S bench --model $M/l8b.gguf --devices cuda:0 --max-tokens 64 --ctx 1024 \
    --streams 1,8 --parallel 8
  check "bench smol 1,8 (rb $rb)" timeout 60 $S bench --model $M/smol.gguf --devices cuda:0 --max-tokens 128 --ctx 1024 \
    --streams 1,8 --parallel 8
done
summary
