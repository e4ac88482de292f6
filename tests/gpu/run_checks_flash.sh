#!/usr/bin/env bash
# The session's final GPU check of the kernels it changed (flash prompt attention, MoE grouped launches): their
# tests under CUDA and one batch-test that crosses prompt tiles, decode tiles and a follow-up's reuse.
set -euo pipefail
source "$(dirname "$0")/env.sh"
check "kernel tests" timeout 170 python3 -m pytest -q -p no:cacheprovider tests/engine/test_attention_kernel.py \
  tests/engine/test_moe_gemv.py tests/engine/test_gpu_kernels.py -k "flash or split or fast_block or moe"
check "batch-test moe small prompts 500-1500 + follow-up, sampled" timeout 100 $S batch-test --max-tokens 16 \
  --follow-up --model $M/qwen3moe.gguf --devices cuda:0 --parallel 3 --prompt-tokens 500-1500 --ctx 2048 \
  --temperature 0.8 --seed 2
summary
