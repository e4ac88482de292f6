#!/usr/bin/env bash
# Issue 12 (and 11) after the MoE kernels: kernel tests under CUDA; qwen3moe small IDENTICAL (greedy, sampled
# with MTP spec 3, 2 stages with piped MTP 2); the qwen3-30b-a3b shape (Q4_K): decode 1 and 4 streams,
# prompts of 512 and 4096 tokens, one decode tile's profile; the dense llama-3-8b and smollm2 shapes for
# regressions (the attention kernel now writes wo's int8 input).
set -euo pipefail
source "$(dirname "$0")/env.sh"
check "kernel tests" timeout 240 python3 -m pytest -q -p no:cacheprovider -x tests/engine/test_moe_gemv.py \
  tests/engine/test_dp4a_gemv.py tests/engine/test_gpu_kernels.py tests/engine/test_attention_kernel.py
$S make-model --arch qwen3moe --shape small --mtp 1 --qtype Q4_K --out $M/moe.gguf >/dev/null
BT="timeout 150 $S batch-test --model $M/moe.gguf --max-tokens 24"
check "batch-test moe greedy" $BT --devices cuda:0 --parallel 4
check "batch-test moe sampled spec 3" $BT --devices cuda:0 --parallel 4 --draft mtp --spec 3 --temperature 0.8 --seed 3
check "batch-test moe 2 stages 2 groups piped 2" $BT --devices cuda:0,cuda:0 --parallel 4 --batch-groups 2 --piped-mtp 2
$S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype Q4_K --out $M/q30.gguf >/dev/null
B="timeout 200 $S bench --model $M/q30.gguf --devices cuda:0"
check "bench 30b-a3b 1,4" $B --streams 1,4 --parallel 4 --max-tokens 64 --ctx 1024
check "bench 30b-a3b prompt 512" $B --streams 1 --prompt-tokens 512 --max-tokens 16 --ctx 2048
check "bench 30b-a3b prompt 4096" $B --streams 1 --prompt-tokens 4096 --max-tokens 16 --ctx 8192
check "tile profile 30b-a3b" timeout 150 python3 tests/gpu/profile_stage.py $M/q30.gguf 1
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
check "bench 8b 1,8" timeout 150 $S bench --model $M/l8b.gguf --devices cuda:0 --max-tokens 64 --ctx 1024 --streams 1,8 --parallel 8
check "batch-test 8b greedy" timeout 150 $S batch-test --model $M/l8b.gguf --devices cuda:0 --parallel 4 --max-tokens 24
$S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf >/dev/null
check "bench smol 1" timeout 60 $S bench --model $M/smol.gguf --devices cuda:0 --streams 1 --max-tokens 128 --ctx 1024
summary
