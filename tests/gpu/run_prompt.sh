#!/usr/bin/env bash
# GPU: exactness after a change to tiles/chunks, and prompt-read speed on long prompts. Logs to $OUT.
set -u
source "$(dirname "$0")/env.sh"
$S make-model --arch llama --shape small --mtp 1 --weights counting --out $M/count.gguf 2>/dev/null
$S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf 2>/dev/null
for L in "--model $M/count.gguf --devices cuda:0 --parallel 4 --spec 4" \
         "--model $M/count.gguf --devices cuda:0,cuda:1 --parallel 4 --batch-groups 2 --piped-mtp 3 --temperature 0.8 --seed 7" \
         "--model $M/gemma3.gguf --devices cuda:0,cuda:1 --parallel 4 --batch-groups 2 --temperature 0.9 --seed 3" \
         "--model $M/qwen3moe.gguf --devices cuda:0 --parallel 3 --piped-mtp 2"; do
  echo "--- batch-test $L"; timeout 120 $S batch-test --max-tokens 32 $L | grep -v "^# note"
done
echo "--- bench smol, 1024-token prompts"
timeout 120 $S bench --model $M/smol.gguf --devices cuda:0 --streams 1,8 --max-tokens 64 --prompt-tokens 1024 --ctx 4096
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf 2>/dev/null
echo "--- bench 8B, 1024-token prompts"
timeout 200 $S bench --model $M/l8b.gguf --devices cuda:0 --streams 1,8 --max-tokens 32 --prompt-tokens 1024 --ctx 4096
timeout 200 $S bench --model $M/l8b.gguf --devices cuda:0,cuda:1 --layer-split 16 --batch-groups 2 --parallel 8 --streams 8 --max-tokens 32 --prompt-tokens 1024 --ctx 4096
