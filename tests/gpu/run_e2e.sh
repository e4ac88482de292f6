#!/usr/bin/env bash
# GPU decode end to end (issue 11): 8B-shaped and SmolLM2-shaped benches with each decode kernel, and the
# 2-GPU batch-test that used to fail during graph capture. One PASS/FAIL line last.
set -euo pipefail
source "$(dirname "$0")/env.sh"
$S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf >/dev/null
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
B8="$S bench --model $M/l8b.gguf --devices cuda:0 --max-tokens 64 --ctx 1024"
check "bench 8b mma 1,8" timeout 150 $B8 --streams 1,8 --parallel 8
check "batch-test 8b 2 GPUs split 12 sampled" timeout 150 $S batch-test --model $M/l8b.gguf --devices cuda:0,cuda:1 --layer-split 12 --parallel 4 --batch-groups 2 --max-tokens 16 --temperature 0.7 --seed 5
check "bench 8b gemv 1" env STRATA_DECODE_KERNEL=gemv timeout 100 $B8 --streams 1
check "bench smol mma 1" timeout 60 $S bench --model $M/smol.gguf --devices cuda:0 --streams 1 --max-tokens 128 --ctx 1024
check "bench smol gemv 1" env STRATA_DECODE_KERNEL=gemv timeout 60 $S bench --model $M/smol.gguf --devices cuda:0 --streams 1 --max-tokens 128 --ctx 1024
summary
