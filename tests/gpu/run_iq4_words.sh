#!/usr/bin/env bash
# Issue 15, session 16: IQ4 codes repacked so that each 32-bit word's halves are the lookup's prmt
# selectors as they stand (engine.kernels.packed.iq4_words; engine.kernels.iq4.kvalues8: 11 instructions
# for eight values where the byte codes took 23). Before it, Nsight Compute on the 8B gate|up IQ4_XS call
# at one row: compute 68% busy, DRAM 30%, 127 registers, 45.1 us against Q4_K's 24.8
# (tests/gpu/run_iq4_profile.sh). A prefetched step now holds the codes, looked up when it runs (sm_90:
# 136 -> 96 registers); prompt tiles read the words' order through the x gather (no extra loads).
# Kernel tests on the GPU (the PTX lookup runs only here), bench_matmul's checks and times for the IQ4
# types, batch-tests (dense and MoE, greedy and sampled), the bench, the decode tile's kernels. Logs to
# $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "IQ4 kernel tests" timeout 200 python3 -m pytest -q -p no:cacheprovider -x tests/engine/test_dp4a_gemv.py \
  tests/engine/test_moe_gemv.py tests/engine/test_packed.py -k "IQ4"
check "matmul IQ4 checks + times" timeout 200 python3 tests/gpu/bench_matmul.py --iq4 --check-types IQ4_XS,IQ4_NL \
  --only llama-3-8b --matrices "gate|up,down,qkv"
$S make-model --arch llama --shape llama-3-8b --qtype IQ4_XS --out $M/l8b-iq4.gguf >/dev/null
$S make-model --arch qwen3moe --shape small --mtp 1 --qtype IQ4_XS --out $M/moe-iq4.gguf >/dev/null
check "ncu dp4a IQ4_XS gate|up 1 row" timeout 120 ncu --clock-control none -k regex:dp4a --launch-skip 4 --launch-count 1 \
  --section SpeedOfLight --section Occupancy env QTYPE=IQ4_XS KERNEL=dp4a ROWS=1 python3 tests/gpu/ncu_imma.py
check "batch-test 8b IQ4_XS greedy 4 slots" $BT --model $M/l8b-iq4.gguf --devices cuda:0 --parallel 4
check "batch-test 8b IQ4_XS sampled 8 slots" $BT --model $M/l8b-iq4.gguf --devices cuda:0 --parallel 8 \
  --temperature 0.8 --seed 5
check "batch-test moe IQ4_XS spec 3 sampled" $BT --model $M/moe-iq4.gguf --devices cuda:0 --parallel 4 --spec 3 \
  --temperature 0.8 --seed 3
check "bench 8b IQ4_XS 1,8" timeout 150 $S bench --model $M/l8b-iq4.gguf --streams 1,8 --parallel 8 $B
check "decode tile 8b IQ4_XS" timeout 150 python3 tests/gpu/profile_stage.py $M/l8b-iq4.gguf 1 8
summary
