#!/usr/bin/env bash
# Where prompt reading's time goes on one GPU (issues 12 and 14): the qwen3-30b-a3b shape's grouped expert
# launches at each configuration (bench_moe.py --sweep-grouped), its 512-row prompt tile and the 8B's
# (profile_stage.py ... prompt), prompts of 512 and 4,096 tokens on both, and on the 8B a 16,000-token read
# beside a decoding stream (strata bench --read-beside).
set -euo pipefail
source "$(dirname "$0")/env.sh"
$S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype Q4_K --out $M/q30.gguf >/dev/null
check "grouped launches, 30b-a3b layer 0" timeout 200 python3 tests/gpu/bench_moe.py $M/q30.gguf --sweep-grouped
check "prompt tile profile 30b-a3b" timeout 120 python3 tests/gpu/profile_stage.py $M/q30.gguf prompt
P="timeout 150 $S bench --devices cuda:0 --streams 1 --max-tokens 8"
check "30b-a3b prompt 512" $P --model $M/q30.gguf --prompt-tokens 512 --ctx 2048
check "30b-a3b prompt 4096" $P --model $M/q30.gguf --prompt-tokens 4096 --ctx 4608
check "30b-a3b decode 1,8" timeout 150 $S bench --model $M/q30.gguf $B --streams 1,8 --parallel 8
rm -f $M/q30.gguf
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
check "prompt tile profile 8b" timeout 120 python3 tests/gpu/profile_stage.py $M/l8b.gguf prompt
check "8b prompt 4096" $P --model $M/l8b.gguf --prompt-tokens 4096 --ctx 4608
check "8b read 16000 beside a stream" timeout 240 $S bench --model $M/l8b.gguf --devices cuda:0 --streams 1 \
  --max-tokens 16 --prompt-tokens 64 --ctx 16640 --read-beside 16000
summary
