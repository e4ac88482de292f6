#!/usr/bin/env bash
# Issue 11: the dp4a kernel with fewer loads per unit (scales side by side in one load): the 8B and
# SmolLM2 shapes timed (8B also with its warps / rows-per-thread sweep and with x's scale floats as one
# vector load, STRATA_DP4A_XV=1), then end to end and exactness.
set -euo pipefail
source "$(dirname "$0")/env.sh"
check "matmul 8b (sweep)" timeout 200 python3 tests/gpu/bench_matmul.py --only llama-3-8b --sweep
check "matmul 8b XV=1" env STRATA_DP4A_XV=1 timeout 150 python3 tests/gpu/bench_matmul.py --only llama-3-8b
check "matmul smol" timeout 150 python3 tests/gpu/bench_matmul.py --only smollm2-135m
$S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf >/dev/null
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
B8="$S bench --model $M/l8b.gguf --devices cuda:0 --max-tokens 64 --ctx 1024 --streams 1"
check "bench 8b 1" timeout 100 $B8
check "bench 8b 1 XV=1" env STRATA_DP4A_XV=1 timeout 100 $B8
check "bench smol 1" timeout 60 $S bench --model $M/smol.gguf --devices cuda:0 --streams 1 --max-tokens 128 --ctx 1024
check "batch-test 8b greedy" timeout 150 $S batch-test --model $M/l8b.gguf --devices cuda:0 --parallel 4 --max-tokens 16
summary
