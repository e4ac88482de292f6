#!/usr/bin/env bash
# Issue 15, session 15: IQ4_XS decode rows in 64-value units (two 32-value runs a thread step, like Q4_K:
# 32 bytes of codes in flight per lane instead of 16, half the loop turns), the lookup still once per
# step. llama.cpp on the same 8B IQ4_XS file this session: tg128 333.7, S_TG 8 streams 1,230; the engine
# before this change 317.3 / 1,022 (QTYPES=IQ4_XS ENGINE=1 run_llama_cpp.sh). Kernel tests on the GPU
# (right, row-invariant, routed experts), batch-tests of lone against batched requests, the matmuls
# and the bench (SHORT=1: the kernel tests, one batch-test and the bench only). Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "IQ4 kernel tests" timeout 200 python3 -m pytest -q -p no:cacheprovider -x tests/engine/test_dp4a_gemv.py \
  tests/engine/test_moe_gemv.py -k "IQ4"
$S make-model --arch llama --shape llama-3-8b --qtype IQ4_XS --out $M/l8b-iq4.gguf >/dev/null
check "batch-test 8b IQ4_XS greedy 4 slots" $BT --model $M/l8b-iq4.gguf --devices cuda:0 --parallel 4
check "bench 8b IQ4_XS 1,8" timeout 150 $S bench --model $M/l8b-iq4.gguf --streams 1,8 --parallel 8 $B
[ -n "${SHORT:-}" ] || check "batch-test 8b IQ4_XS sampled 8 slots" $BT --model $M/l8b-iq4.gguf --devices cuda:0 \
  --parallel 8 --temperature 0.8 --seed 5
[ -n "${SHORT:-}" ] || check "matmul IQ4" timeout 120 python3 tests/gpu/bench_matmul.py --iq4 --no-checks \
  --only llama-3-8b --matrices "gate|up,down,qkv"
summary
