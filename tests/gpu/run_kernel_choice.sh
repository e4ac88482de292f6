#!/usr/bin/env bash
# Issue 11: the two decode kernels end to end with chaining on (8B: 1 and 8 streams each; SmolLM2 1 stream),
# exactness with --decode-kernel imma (greedy: chained windows; sampled), the kernels' GPU tests, and
# where a chained 8B step goes (host parts, tile kernels).
set -euo pipefail
source "$(dirname "$0")/env.sh"
$S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf >/dev/null
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
B8="$S bench --model $M/l8b.gguf --devices cuda:0 --max-tokens 64 --ctx 1024"
check "kernel tests on GPU" timeout 200 python3 -m pytest -q -p no:cacheprovider -x tests/engine/test_imma_matmul.py tests/engine/test_dp4a_gemv.py tests/engine/test_layout.py
check "bench 8b 1,8 dp4a" timeout 150 $B8 --streams 1,8 --parallel 8
check "bench 8b 1,8 imma" timeout 150 $B8 --streams 1,8 --parallel 8 --decode-kernel imma
check "bench smol 1" timeout 60 $S bench --model $M/smol.gguf --devices cuda:0 --streams 1 --max-tokens 128 --ctx 1024
check "batch-test 8b imma greedy" timeout 150 $S batch-test --model $M/l8b.gguf --devices cuda:0 --parallel 4 --max-tokens 24 --decode-kernel imma
check "batch-test 8b imma sampled" timeout 150 $S batch-test --model $M/l8b.gguf --devices cuda:0 --parallel 4 --max-tokens 16 --temperature 0.8 --seed 3 --decode-kernel imma
check "host parts 8b chained" timeout 150 python3 tests/gpu/profile_host.py $M/l8b.gguf 60
check "tile profile 8b" timeout 150 python3 tests/gpu/profile_stage.py $M/l8b.gguf 1
summary
