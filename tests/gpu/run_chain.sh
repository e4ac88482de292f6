#!/usr/bin/env bash
# Chained greedy windows (issue 11, host gap): decode benches with chaining (the GPU default) and without
# (STRATA_CHAIN=0) on the 8B and SmolLM2 shapes, the chaining tests on the GPU, exactness on 1 GPU and on
# 2 (where chaining is off: the pipeline's stage hand-off), the host parts of a step, and the 8-stream
# figure with the imma decode kernel.
set -euo pipefail
source "$(dirname "$0")/env.sh"
$S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf >/dev/null
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
B8="$S bench --model $M/l8b.gguf --devices cuda:0 --max-tokens 64 --ctx 1024"
BS="$S bench --model $M/smol.gguf --devices cuda:0 --streams 1 --max-tokens 128 --ctx 1024"
check "chaining tests on GPU" timeout 200 python3 -m pytest -q -p no:cacheprovider -x tests/engine/test_chaining.py tests/engine/test_scheduler.py
check "bench 8b 1,8 chained" timeout 150 $B8 --streams 1,8 --parallel 8
check "bench 8b 1 unchained" env STRATA_CHAIN=0 timeout 100 $B8 --streams 1
check "bench smol 1 chained" timeout 60 $BS
check "bench smol 1 unchained" env STRATA_CHAIN=0 timeout 60 $BS
check "batch-test 8b 1 GPU greedy" timeout 150 $S batch-test --model $M/l8b.gguf --devices cuda:0 --parallel 4 --max-tokens 24
check "batch-test 8b 1 GPU sampled" timeout 150 $S batch-test --model $M/l8b.gguf --devices cuda:0 --parallel 4 --max-tokens 16 --temperature 0.8 --seed 3
NGPU=$(python3 -c 'import torch; print(torch.cuda.device_count())')
if [ "$NGPU" -ge 2 ]; then
  $S make-model --arch llama --shape small --mtp 1 --weights counting --out $M/count.gguf >/dev/null
  check "batch-test counting piped 3, 2 GPUs greedy" timeout 120 $S batch-test --model $M/count.gguf --devices cuda:0,cuda:1 --parallel 4 --batch-groups 2 --piped-mtp 3 --max-tokens 32
  check "batch-test 8b 2 GPUs split 12 sampled" timeout 150 $S batch-test --model $M/l8b.gguf --devices cuda:0,cuda:1 --layer-split 12 --parallel 4 --batch-groups 2 --max-tokens 12 --temperature 0.7 --seed 5
fi
check "host parts smol chained" timeout 100 python3 tests/gpu/profile_host.py $M/smol.gguf 100
check "bench 8b 8 imma" env STRATA_DECODE_KERNEL=imma timeout 150 $B8 --streams 8 --parallel 8
summary
