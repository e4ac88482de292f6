#!/usr/bin/env bash
# Decoding at long contexts on one GPU (issue 14): the decode tiles' split attention at 6,000 positions for 1,
# 4 and 8 real rows at each chunking (bench_attention.py), where an 8B decode tile's time goes at position
# 6000 (profile_stage.py, 1 and 4 rows), and the MoE prompt tile's grouped launches around their new sizes.
set -euo pipefail
source "$(dirname "$0")/env.sh"
check "attention alone" timeout 200 python3 tests/gpu/bench_attention.py
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
check "decode tile at 6000" env POS=6000 timeout 150 python3 tests/gpu/profile_stage.py $M/l8b.gguf 1 4
rm -f $M/l8b.gguf
$S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype Q4_K --out $M/q30.gguf >/dev/null
check "grouped launches, 30b-a3b layer 0" timeout 200 python3 tests/gpu/bench_moe.py $M/q30.gguf --sweep-grouped
summary
