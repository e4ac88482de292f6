#!/usr/bin/env bash
# Issue 11 end of session: decode benches (8B 1 and 8 streams, SmolLM2 1 stream, 8B with 2-warp decode
# programs), exactness greedy and sampled on 1 GPU and piped on 2, the host parts of a decode step.
set -euo pipefail
source "$(dirname "$0")/env.sh"
$S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf >/dev/null
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
B8="$S bench --model $M/l8b.gguf --devices cuda:0 --max-tokens 64 --ctx 1024"
check "bench 8b 1,8" timeout 150 $B8 --streams 1,8 --parallel 8
check "bench smol 1" timeout 60 $S bench --model $M/smol.gguf --devices cuda:0 --streams 1 --max-tokens 128 --ctx 1024
check "bench 8b 1, 2-warp decode programs" env STRATA_DP4A_WARPS=2 timeout 100 $B8 --streams 1
check "batch-test 8b 1 GPU greedy" timeout 150 $S batch-test --model $M/l8b.gguf --devices cuda:0 --parallel 4 --max-tokens 16
check "batch-test 8b 1 GPU sampled" timeout 150 $S batch-test --model $M/l8b.gguf --devices cuda:0 --parallel 4 --max-tokens 16 --temperature 0.8 --seed 3
NGPU=$(python3 -c 'import torch; print(torch.cuda.device_count())')
if [ "$NGPU" -ge 2 ]; then
  $S make-model --arch llama --shape small --mtp 1 --weights counting --out $M/count.gguf >/dev/null
  check "batch-test counting piped 3, 2 GPUs greedy" timeout 120 $S batch-test --model $M/count.gguf --devices cuda:0,cuda:1 --parallel 4 --batch-groups 2 --piped-mtp 3 --max-tokens 32
  check "batch-test 8b 2 GPUs split 12 sampled" timeout 150 $S batch-test --model $M/l8b.gguf --devices cuda:0,cuda:1 --layer-split 12 --parallel 4 --batch-groups 2 --max-tokens 12 --temperature 0.7 --seed 5
fi
check "host parts 8b" timeout 150 python3 tests/gpu/profile_host.py $M/l8b.gguf 60
summary
