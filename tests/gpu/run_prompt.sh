#!/usr/bin/env bash
# GPU: exactness after a change to tiles/chunks, and prompt-read speed on long prompts. Logs to $OUT.
# Ends with one PASS/FAIL line; exits non-zero if any check failed.
set -euo pipefail
source "$(dirname "$0")/env.sh"
check "make count" $S make-model --arch llama --shape small --mtp 1 --weights counting --out $M/count.gguf
check "make smol" $S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf
for L in "--model $M/count.gguf --devices cuda:0 --parallel 4 --spec 4" \
         "--model $M/count.gguf --devices cuda:0,cuda:1 --parallel 4 --batch-groups 2 --piped-mtp 3 --temperature 0.8 --seed 7" \
         "--model $M/gemma3.gguf --devices cuda:0,cuda:1 --parallel 4 --batch-groups 2 --temperature 0.9 --seed 3" \
         "--model $M/qwen3moe.gguf --devices cuda:0 --parallel 3 --piped-mtp 2"; do
  check "batch-test $L" without "^# note" timeout 120 $S batch-test --max-tokens 32 $L
done
check "bench smol, 1024-token prompts" timeout 120 $S bench --model $M/smol.gguf --devices cuda:0 --streams 1,8 --max-tokens 64 --prompt-tokens 1024 --ctx 4096
check "make l8b" $S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf
check "bench 8B, 1024-token prompts, 1 GPU" timeout 200 $S bench --model $M/l8b.gguf --devices cuda:0 --streams 1,8 --max-tokens 32 --prompt-tokens 1024 --ctx 4096
check "bench 8B, 1024-token prompts, 2 GPUs" timeout 200 $S bench --model $M/l8b.gguf --devices cuda:0,cuda:1 --layer-split 16 --batch-groups 2 --parallel 8 --streams 8 --max-tokens 32 --prompt-tokens 1024 --ctx 4096
summary
