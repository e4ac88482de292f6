#!/usr/bin/env bash
# Issue 11, session 12 (after run_launch.sh): eight 8B streams on the bf16 decode kernel with the windows
# now queued without host waits (default 528 programs / 4 codes per asm call, and 1056 / 2), and where a
# SmolLM2 step's host time goes (one stream: its window still takes ~1.3 ms against a ~0.93 ms replay).
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
l8b_and_smol
B="--prompt-tokens 512 --max-tokens 128 --ctx 2048 --devices cuda:0 --streams 8 --parallel 8 --decode-kernel bf16"
check "bench 8b 8 bf16" timeout 100 $S bench --model $M/l8b.gguf $B
check "bench 8b 8 bf16 1056/p2" env STRATA_BF16_TARGET=1056 STRATA_BF16_PACK=2 timeout 100 $S bench --model $M/l8b.gguf $B
check "host profile smol" timeout 80 python3 tests/gpu/profile_host.py $M/smol.gguf 60
summary
