#!/usr/bin/env bash
# Issue 14: a true 16,000-token read beside a decoding 8B stream (the filler now sized to the tokenizer; the
# last run read 13,333), and where a 4-row decode tile's time goes at 6,000 positions with the tensor-core
# split attention.
set -euo pipefail
source "$(dirname "$0")/env.sh"
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
check "8b read 16000 beside a stream" timeout 200 $S bench --model $M/l8b.gguf --devices cuda:0 --streams 1 \
  --max-tokens 16 --prompt-tokens 64 --ctx 16640 --read-beside 16000
check "decode tile at 6000" env POS=6000 timeout 120 python3 tests/gpu/profile_stage.py $M/l8b.gguf 1 4
summary
