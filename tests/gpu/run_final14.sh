#!/usr/bin/env bash
# Session 14's closing figures at the defaults (programmatic dependent launch with 1024 bytes a weight row
# prefetched, fused split attention, 1-row prefetch): each bench twice (8-stream figures came out
# bimodal this session: SmolLM2 3,443 or 5,549, 8B 1,172 or 1,390 tok/s) with the new chained_pct column
# (chained windows launched before their feeding window ended), the qwen3-30b-a3b MoE shape one stream, the 8B shape in IQ3_S (issue 15), and a
# sampled 8B batch-test. Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
l8b_and_smol
check "batch-test 8b sampled 4 slots" $BT --model $M/l8b.gguf --devices cuda:0 --parallel 4 --temperature 0.8 --seed 4
for i in 1 2; do
  check "bench smol 1,8 #$i" timeout 120 $S bench --model $M/smol.gguf --streams 1,8 --parallel 8 $B
  check "bench 8b 1,8 #$i" timeout 150 $S bench --model $M/l8b.gguf --streams 1,8 --parallel 8 $B
done
$S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype Q4_K --out $M/q30.gguf >/dev/null
check "bench q30 1" timeout 200 $S bench --model $M/q30.gguf --streams 1 --parallel 8 $B
$S make-model --arch llama --shape llama-3-8b --qtype IQ3_S --out $M/iq3.gguf >/dev/null
check "bench 8b IQ3_S 1,8" timeout 150 $S bench --model $M/iq3.gguf --streams 1,8 --parallel 8 $B
summary
