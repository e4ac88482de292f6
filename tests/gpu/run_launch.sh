#!/usr/bin/env bash
# Issue 11, session 12: windows queued without host waits (engine.graphs.on_device: the launch path's
# host-to-device copies no longer wait for the stream, so a chained window's successor is queued while
# it runs) and the dp4a kernel's two weight rows per x load by shape (shared_x): exactness (1 GPU; two
# stages on cuda:0), one stream's host profile, and the 8B / SmolLM2 benches. Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
l8b_and_smol
BT="timeout 120 $S batch-test --max-tokens 24"
B="--prompt-tokens 512 --max-tokens 128 --ctx 2048 --devices cuda:0"
check "bench 8b 1,8" timeout 150 $S bench --model $M/l8b.gguf --streams 1,8 --parallel 8 $B
check "bench smol 1,8" timeout 80 $S bench --model $M/smol.gguf --streams 1,8 --parallel 8 $B
check "batch-test 8b greedy parallel 4 (chained)" $BT --model $M/l8b.gguf --devices cuda:0 --parallel 4
check "batch-test 8b sampled parallel 8" $BT --model $M/l8b.gguf --devices cuda:0 --parallel 8 --temperature 0.8 --seed 3
check "batch-test 8b 2 stages split 12, 2 groups sampled" $BT --model $M/l8b.gguf --devices cuda:0,cuda:0 \
  --layer-split 12 --parallel 4 --batch-groups 2 --temperature 0.7 --seed 5
check "batch-test smol greedy parallel 3" $BT --model $M/smol.gguf --devices cuda:0 --parallel 3
[ -n "${NO_PROFILE:-}" ] || check "host profile 8b" timeout 100 python3 tests/gpu/profile_host.py $M/l8b.gguf 40
summary
