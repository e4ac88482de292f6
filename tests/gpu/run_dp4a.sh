#!/usr/bin/env bash
# The int8 decode path (issue 11): kernel tests on the GPU, end-to-end decode benches on the 8B and SmolLM2
# shapes, exactness (batch-test) on 1 and 2 GPUs with and without piped drafts, and where a decode step's
# time goes (tile kernels, host gap). QUICK=1 skips the microbenchmark. One PASS/FAIL line last.
set -euo pipefail
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
[ -n "${QUICK:-}" ] || check "kernel microbenchmark" python3 tests/gpu/bench_matmul.py ${SWEEP:-} ${ONLY:+--only $ONLY} --json "$OUT/matmul.json"
check "int8 kernel tests on GPU" timeout 200 python3 -m pytest -q -p no:cacheprovider -x tests/engine/test_dp4a_gemv.py
$S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf >/dev/null
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
B8="$S bench --model $M/l8b.gguf --devices cuda:0 --max-tokens 64 --ctx 1024"
check "bench 8b 1,8" timeout 150 $B8 --streams 1,8 --parallel 8
check "bench smol 1" timeout 60 $S bench --model $M/smol.gguf --devices cuda:0 --streams 1 --max-tokens 128 --ctx 1024
check "batch-test 8b 1 GPU sampled" timeout 150 $S batch-test --model $M/l8b.gguf --devices cuda:0 --parallel 4 --max-tokens 24 --temperature 0.8 --seed 3
NGPU=$(python3 -c 'import torch; print(torch.cuda.device_count())')
if [ "$NGPU" -ge 2 ]; then
  check "batch-test 8b 2 GPUs split 12 sampled" timeout 150 $S batch-test --model $M/l8b.gguf --devices cuda:0,cuda:1 --layer-split 12 --parallel 4 --batch-groups 2 --max-tokens 16 --temperature 0.7 --seed 5
  $S make-model --arch llama --shape small --mtp 1 --weights counting --out $M/count.gguf >/dev/null
  check "batch-test counting piped 3, 2 GPUs sampled" timeout 120 $S batch-test --model $M/count.gguf --devices cuda:0,cuda:1 --parallel 4 --batch-groups 2 --piped-mtp 3 --max-tokens 32 --temperature 0.8 --seed 7
fi
check "tile profile 8b" timeout 150 python3 tests/gpu/profile_stage.py $M/l8b.gguf 1
check "host gap 8b" timeout 150 python3 tests/gpu/profile_host.py $M/l8b.gguf 60
check "host gap smol" timeout 100 python3 tests/gpu/profile_host.py $M/smol.gguf 100
summary
