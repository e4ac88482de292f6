#!/usr/bin/env bash
# Issues 11 / 12 / 14, session 44 (about 8 minutes). Session 43's illegal address with STRATA_IQ_TABLES=1 did
# not come back with blocking launches on the down matrix (H100, 2026-12-07); here without blocking, as it
# first ran. Then the table codes' prompt kernel tests, kind 14's x rows a pass (swept, and eight 8B IQ2_XS
# streams at 4 against 8), and STRATA_PROMPT_W32 for the kinds session 44's call did not cover: Q2_K's
# planes (kind 12) and the int8 codes per 16 (kind 8: Q6_K / Q3_K with their planes off), and the 8B Q6_K
# prompt end to end. Carry [".whl"]. Log: $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
check "kernels tables=1, both matrices, async" env STRATA_IQ_TABLES=1 timeout 90 python3 tests/gpu/bench_matmul.py \
  --no-checks --sweep-rb --types IQ3_S,IQ2_XS --matrices "gate|up,down"
check "kernel tests, table codes" env STRATA_IQ_TABLES=1 timeout 150 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_packed.py tests/engine/test_moe_gemv.py -k "table or IQ1_M or (matmul_is_right and IQ)"
for f in 0 1; do
  check "prompt tiles Q2_K w32=$f" env STRATA_PROMPT_W32=$f timeout 60 python3 tests/gpu/bench_matmul.py --no-checks \
    --types Q2_K --matrices "gate|up,down"
  check "prompt tiles int8 per 16 w32=$f" env STRATA_PROMPT_W32=$f STRATA_Q6K_PLANES=0 STRATA_Q3K_PLANES=0 timeout 60 \
    python3 tests/gpu/bench_matmul.py --no-checks --types Q6_K,Q3_K --matrices "gate|up,down"
done
$S make-model --arch llama --shape llama-3-8b --qtype IQ2_XS --out $M/l8b.gguf >/dev/null
for rb in 4 8; do
  check "bench 8b IQ2_XS tables rb=$rb" env STRATA_IQ_TABLES=1 STRATA_DP4A_RB=$rb timeout 60 $S bench \
    --model $M/l8b.gguf --streams 1,8 --parallel 8 --prompt-tokens 512 --max-tokens 48 --ctx 1024 --devices cuda:0
done
$S make-model --arch llama --shape llama-3-8b --qtype Q6_K --out $M/l8b.gguf >/dev/null
for f in 0 1; do
  check "prompt 8b Q6_K w32=$f" env STRATA_PROMPT_W32=$f timeout 50 $S bench --model $M/l8b.gguf --streams 1 \
    --parallel 1 --prompt-tokens 512 --max-tokens 16 --ctx 1024 --devices cuda:0
done
summary
