#!/usr/bin/env bash
# Issues 11 / 14, session 43: run_q2k_xsums.sh and run_prompt_w32.sh cut to one call (about 6 minutes).
# STRATA_Q2K_XSUMS=1 (Q2_K's x sums per 16 once per x load) and STRATA_PROMPT_W32=1 (the scale-per-16 types'
# prompt values as [BN, 8, 32]) each against off: their kernel tests with the flag on, the 8B matrices each
# way, the llama-3-8b shape Q2_K at one and eight streams each way (xsums), its 512-token prompt each way
# for Q3_K and Q2_K (w32), a sampled batch-test with both on. Carry [".whl"]. Log: $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
check "kernel tests, both on" env STRATA_Q2K_XSUMS=1 STRATA_PROMPT_W32=1 timeout 150 python3 -m pytest -q \
  -p no:cacheprovider tests/engine/test_dp4a_gemv.py tests/engine/test_packed.py -k "q2k_x_sums or scale16_values"
for f in 0 1; do
  check "Q2_K decode kernels xsums=$f" env STRATA_Q2K_XSUMS=$f timeout 90 python3 tests/gpu/bench_matmul.py \
    --no-checks --sweep-rb --types Q2_K --matrices "gate|up,down"
  check "prompt tiles w32=$f" env STRATA_PROMPT_W32=$f timeout 90 python3 tests/gpu/bench_matmul.py --no-checks \
    --types Q6_K,Q3_K --matrices "gate|up,down"
done
P="--streams 1 --parallel 1 --prompt-tokens 512 --max-tokens 16 --ctx 1024 --devices cuda:0"
$S make-model --arch llama --shape llama-3-8b --qtype Q3_K --out $M/l8b.gguf >/dev/null
for f in 0 1; do
  check "prompt 8b Q3_K w32=$f" env STRATA_PROMPT_W32=$f timeout 50 $S bench --model $M/l8b.gguf $P
done
$S make-model --arch llama --shape llama-3-8b --qtype Q2_K --out $M/l8b.gguf >/dev/null
for f in 0 1; do
  check "bench 8b Q2_K xsums=$f w32=$f" env STRATA_Q2K_XSUMS=$f STRATA_PROMPT_W32=$f timeout 70 $S bench \
    --model $M/l8b.gguf --streams 1,8 --parallel 8 --prompt-tokens 512 --max-tokens 48 --ctx 1024 --devices cuda:0
done
check "batch-test 8b Q2_K both on, sampled 8 slots, prompts of 300" env STRATA_Q2K_XSUMS=1 STRATA_PROMPT_W32=1 \
  $BT --model $M/l8b.gguf --devices cuda:0 --parallel 8 --temperature 0.8 --seed 6 --prompt-tokens 300
summary
