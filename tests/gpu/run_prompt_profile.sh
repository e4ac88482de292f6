#!/usr/bin/env bash
# Where a prompt tile's time goes: the qwen3-30b-a3b shape's 512-row MoE tile and the llama-3-8b shape's
# 128-row tile, each replayed as its captured graph (tests/gpu/profile_stage.py ... prompt).
set -euo pipefail
source "$(dirname "$0")/env.sh"
$S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype Q4_K --out $M/q30.gguf >/dev/null
check "prompt tile profile 30b-a3b" timeout 200 python3 tests/gpu/profile_stage.py $M/q30.gguf prompt
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
check "prompt tile profile 8b" timeout 150 python3 tests/gpu/profile_stage.py $M/l8b.gguf prompt
summary
