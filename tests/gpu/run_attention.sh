#!/usr/bin/env bash
# Issue 11: the grouped tile attention: its tests on the GPU, the decode benches (8B 1 and 8 streams,
# SmolLM2 1), exactness (batch-test greedy and sampled on the 8B), the tile profile.
set -euo pipefail
source "$(dirname "$0")/env.sh"
$S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf >/dev/null
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
B8="$S bench --model $M/l8b.gguf --devices cuda:0 --max-tokens 64 --ctx 1024"
check "kernel tests on GPU" timeout 300 python3 -m pytest -q -p no:cacheprovider -x tests/engine/test_attention_kernel.py tests/engine/test_gpu_kernels.py
check "bench 8b 1,8" timeout 150 $B8 --streams 1,8 --parallel 8
check "bench smol 1" timeout 60 $S bench --model $M/smol.gguf --devices cuda:0 --streams 1 --max-tokens 128 --ctx 1024
check "batch-test 8b greedy" timeout 150 $S batch-test --model $M/l8b.gguf --devices cuda:0 --parallel 4 --max-tokens 24
check "batch-test 8b sampled" timeout 150 $S batch-test --model $M/l8b.gguf --devices cuda:0 --parallel 4 --max-tokens 16 --temperature 0.8 --seed 3
check "tile profile 8b" timeout 150 python3 tests/gpu/profile_stage.py $M/l8b.gguf 1
check "tile profile smol" timeout 100 python3 tests/gpu/profile_stage.py $M/smol.gguf 1
summary
