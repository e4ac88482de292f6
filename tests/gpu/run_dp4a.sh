#!/usr/bin/env bash
# The dp4a decode kernel (issue 11): kernel checks and microbenchmark (dp4a beside the float gemv and the
# tensor-core kernel, with a warps / rows-per-thread sweep), kernel tests on the GPU, end-to-end decode
# benches on the 8B and SmolLM2 shapes, exactness (batch-test) on 1 and 2 GPUs. One PASS/FAIL line last.
set -euo pipefail
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
check "kernel microbenchmark" python3 tests/gpu/bench_matmul.py ${SWEEP:-} ${ONLY:+--only $ONLY} --json "$OUT/matmul.json"
[ -n "${QUICK:-}" ] || check "kernel tests on GPU" timeout 200 python3 -m pytest -q -p no:cacheprovider -x tests/engine/test_packed.py tests/engine/test_gpu_kernels.py
$S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf >/dev/null
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
B8="$S bench --model $M/l8b.gguf --devices cuda:0 --max-tokens 64 --ctx 1024"
check "profile 8b decode tile" timeout 200 python3 tests/gpu/profile_stage.py $M/l8b.gguf 1 8
check "bench 8b dp4a 1,8" timeout 150 $B8 --streams 1,8 --parallel 8
check "bench smol dp4a 1" timeout 60 $S bench --model $M/smol.gguf --devices cuda:0 --streams 1 --max-tokens 128 --ctx 1024
check "batch-test 8b 1 GPU sampled" timeout 150 $S batch-test --model $M/l8b.gguf --devices cuda:0 --parallel 4 --max-tokens 24 --temperature 0.8 --seed 3
NGPU=$(python3 -c 'import torch; print(torch.cuda.device_count())')
if [ "$NGPU" -ge 2 ] && [ -z "${QUICK:-}" ]; then
  check "batch-test 8b 2 GPUs split 12 sampled" timeout 150 $S batch-test --model $M/l8b.gguf --devices cuda:0,cuda:1 --layer-split 12 --parallel 4 --batch-groups 2 --max-tokens 16 --temperature 0.7 --seed 5
fi
[ -n "${QUICK:-}" ] || check "bench 8b mma 1 (before)" env STRATA_DECODE_KERNEL=mma timeout 100 $B8 --streams 1
summary
