#!/usr/bin/env bash
# The int8 tensor-core decode kernel (issue 11): its checks and timing beside dp4a on the 8B shapes
# (SWEEP_IMMA=1: its BN / warps / stages / split sweep), the GPU kernel tests, end-to-end decode benches
# with STRATA_DECODE_KERNEL=imma against the default, and exactness with it (batch-test, sampled).
set -euo pipefail
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
[ -n "${QUICK:-}" ] || check "kernel microbenchmark" timeout 300 python3 tests/gpu/bench_matmul.py ${SWEEP_IMMA:+--sweep-imma} --only ${ONLY:-llama-3-8b} --json "$OUT/matmul.json"
check "int8 kernel tests on GPU" timeout 200 python3 -m pytest -q -p no:cacheprovider -x tests/engine/test_imma_matmul.py tests/engine/test_dp4a_gemv.py
$S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf >/dev/null
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
B8="$S bench --model $M/l8b.gguf --devices cuda:0 --max-tokens 64 --ctx 1024"
check "bench 8b 1,8 imma" env STRATA_DECODE_KERNEL=imma timeout 150 $B8 --streams 1,8 --parallel 8
check "bench 8b 1,8 dp4a" timeout 150 $B8 --streams 1,8 --parallel 8
check "bench smol 1 imma" env STRATA_DECODE_KERNEL=imma timeout 60 $S bench --model $M/smol.gguf --devices cuda:0 --streams 1 --max-tokens 128 --ctx 1024
check "batch-test 8b 1 GPU sampled imma" env STRATA_DECODE_KERNEL=imma timeout 150 $S batch-test --model $M/l8b.gguf --devices cuda:0 --parallel 4 --max-tokens 16 --temperature 0.8 --seed 3
summary
