#!/usr/bin/env bash
# GPU decode (issue 11): kernel checks + microbenchmark, end-to-end decode benches, exactness on 1 and 2
# GPUs with the streaming kernels, and a profile of a decode run. Logs to $OUT; one PASS/FAIL line last.
set -euo pipefail
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
check "kernel microbenchmark" python3 tests/gpu/bench_matmul.py ${SWEEP:-} --json "$OUT/matmul.json"
check "kernel tests on GPU" timeout 150 python3 -m pytest -q -p no:cacheprovider tests/engine/test_packed.py tests/engine/test_gpu_kernels.py
$S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf >/dev/null
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
check "batch-test 8b 1 GPU sampled" timeout 300 $S batch-test --model $M/l8b.gguf --devices cuda:0 --parallel 4 --max-tokens 24 --temperature 0.8 --seed 3
NGPU=$(python3 -c 'import torch; print(torch.cuda.device_count())')
if [ "$NGPU" -ge 2 ]; then
  check "batch-test 8b 2 GPUs split 12 sampled" timeout 300 $S batch-test --model $M/l8b.gguf --devices cuda:0,cuda:1 --layer-split 12 --parallel 4 --batch-groups 2 --max-tokens 24 --temperature 0.7 --seed 5
fi
$S make-model --arch llama --shape small --mtp 1 --weights counting --out $M/count.gguf >/dev/null
[ "$NGPU" -ge 2 ] && check "batch-test counting piped 3, 2 GPUs sampled" timeout 120 $S batch-test --model $M/count.gguf --devices cuda:0,cuda:1 --parallel 4 --batch-groups 2 --piped-mtp 3 --max-tokens 32 --temperature 0.8 --seed 7
check "batch-test counting spec 4, 1 GPU" timeout 120 $S batch-test --model $M/count.gguf --devices cuda:0 --parallel 3 --spec 4 --max-tokens 32
check "bench smollm2 shape" timeout 200 $S bench --model $M/smol.gguf --devices cuda:0 --streams 1 --max-tokens 128 --ctx 1024
check "bench 8b" timeout 300 $S bench --model $M/l8b.gguf --devices cuda:0 --streams 1,8 --parallel 8 --max-tokens 64 --ctx 1024
check "profile smollm2 decode" timeout 200 python3 tests/gpu/profile_decode.py $M/smol.gguf cuda:0 64
summary
