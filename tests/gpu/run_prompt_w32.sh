#!/usr/bin/env bash
# Issues 11 / 14, session 42 (written, not yet run): the prompt values of the types with a scale per 16 (Q6_K's
# and Q3_K's int8 codes, IQ2_XS's, the 6-, 3- and 2-bit planes) built as [BN, 8, 32] with each 32's two scales
# selected (STRATA_PROMPT_W32=1, engine/kernels/scale16_chunk.py) instead of [BN, 16, 16] reshaped. On an
# H100 (run_planes_prompt.sh) their 128-row gate|up tiles took 575-873 us against 324 for Q5_K's planes
# (built as [BN, 4, 32] pairs). The kernel tests with it on, the 128-row tiles each way, the 8B prompt
# (Q3_K, Q2_K, and Q4_K with a Q6_K head, v and down: --mix) each way. If it wins: PROMPT_W32 on.
# Carry [".whl"]. Log: $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
check "kernel tests w32" env STRATA_PROMPT_W32=1 timeout 200 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_packed.py -k "scale16_values or Q6_K or Q3_K or Q2_K or IQ2"
for f in 0 1; do
  check "tiles w32=$f" env STRATA_PROMPT_W32=$f timeout 120 python3 tests/gpu/bench_matmul.py --no-checks \
    --types Q6_K,Q3_K,Q2_K,IQ2_XS --matrices "gate|up,down"
done
P="--streams 1 --parallel 1 --prompt-tokens 512 --max-tokens 16 --ctx 1024 --devices cuda:0"
for qt in Q3_K Q2_K "Q4_K --mix"; do
  $S make-model --arch llama --shape llama-3-8b --qtype $qt --out $M/l8b.gguf >/dev/null
  for f in 0 1 0 1; do
    check "prompt 8b $qt w32=$f" env STRATA_PROMPT_W32=$f timeout 60 $S bench --model $M/l8b.gguf $P
  done
done
check "batch-test 8b Q4_K mix w32 sampled, prompts of 300" env STRATA_PROMPT_W32=1 $BT --model $M/l8b.gguf \
  --devices cuda:0 --parallel 4 --temperature 0.8 --seed 6 --prompt-tokens 300
summary
