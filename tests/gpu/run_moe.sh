#!/usr/bin/env bash
# Issue 12 on one GPU: MoE on the device (engine.kernels.moe_gemv for decode tiles, moe_grouped for prompt
# tiles). Kernel tests under CUDA; the qwen3moe small model IDENTICAL in batch-test (greedy, sampled with
# MTP spec 3, two stages on one GPU with 2 groups and piped MTP 2, sampled); the qwen3-30b-a3b shape
# (Q4_K): decode 1 and 4 streams, prompts of 512 and 4096 tokens, the MoE kernels alone at each
# configuration (bench_moe.py), where a decode tile's and a prompt tile's time goes (profile_stage.py),
# and the host's share of a step. QUICK=1: the tests and batch-tests only.
set -euo pipefail
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
check "kernel tests" timeout 240 python3 -m pytest -q -p no:cacheprovider -x tests/engine/test_moe_gemv.py \
  tests/engine/test_attention_kernel.py tests/engine/test_dp4a_gemv.py tests/engine/test_gpu_kernels.py
$S make-model --arch qwen3moe --shape small --mtp 1 --qtype Q4_K --out $M/moe.gguf >/dev/null
BT="timeout 150 $S batch-test --model $M/moe.gguf --max-tokens 24"
check "batch-test moe greedy" $BT --devices cuda:0 --parallel 4
check "batch-test moe sampled spec 3" $BT --devices cuda:0 --parallel 4 --draft mtp --spec 3 --temperature 0.8 --seed 3
check "batch-test moe 2 stages 2 groups piped 2 sampled" $BT --devices cuda:0,cuda:0 --parallel 4 --batch-groups 2 \
  --piped-mtp 2 --temperature 0.8 --seed 5
[ -n "${QUICK:-}" ] && { summary; exit; }
$S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype Q4_K --out $M/q30.gguf >/dev/null
B="timeout 200 $S bench --model $M/q30.gguf --devices cuda:0"
check "bench 30b-a3b decode 1,4" $B --streams 1,4 --parallel 4 --max-tokens 64 --ctx 1024
check "bench 30b-a3b prompt 512" $B --streams 1 --prompt-tokens 512 --max-tokens 16 --ctx 2048
check "bench 30b-a3b prompt 4096" $B --streams 1 --prompt-tokens 4096 --max-tokens 16 --ctx 8192
check "moe kernels alone, 30b-a3b layer 0" timeout 240 python3 tests/gpu/bench_moe.py $M/q30.gguf
check "decode tile profile 30b-a3b" timeout 150 python3 tests/gpu/profile_stage.py $M/q30.gguf 1 2 8
check "prompt tile profile 30b-a3b" timeout 150 python3 tests/gpu/profile_stage.py $M/q30.gguf prompt
check "host parts 30b-a3b" timeout 150 python3 tests/gpu/profile_host.py $M/q30.gguf 40
summary
