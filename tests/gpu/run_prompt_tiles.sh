#!/usr/bin/env bash
# Issue 14: the prompt matmul's reuse of each dequantized weight tile. The llama-3-8b shape (Q4_K) reads a
# 512- and a 4096-token prompt for each "TILE:BM:WARPS" in $CONFIGS: prompt tile size (STRATA_PROMPT_TILE),
# rows per tensor-core program (STRATA_MMA_BM) and warps per program (STRATA_SMM_WARPS; the kernel spills
# at 4 warps: tests/gpu/sass_report.py mma 4 64 4 says 2416 bytes of stack at 64 rows, 448 at 8 warps),
# with batch-test IDENTICAL at each; then where a prompt tile's time goes at $BEST (default "512:64:8").
set -euo pipefail
source "$(dirname "$0")/env.sh"
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
for c in ${CONFIGS:-128:64:4 128:64:8 512:64:8 512:128:8}; do
  IFS=: read -r STRATA_PROMPT_TILE STRATA_MMA_BM STRATA_SMM_WARPS <<< "$c"
  export STRATA_PROMPT_TILE STRATA_MMA_BM STRATA_SMM_WARPS
  step "prompt tile $STRATA_PROMPT_TILE, $STRATA_MMA_BM rows and $STRATA_SMM_WARPS warps per program"
  check "batch-test 8b ($c)" timeout 150 $S batch-test --model $M/l8b.gguf --devices cuda:0 --parallel 4 --max-tokens 8
  check "prompt 512 ($c)" timeout 120 $S bench --model $M/l8b.gguf --devices cuda:0 --streams 1 --prompt-tokens 512 \
    --max-tokens 16 --ctx 2048
  check "prompt 4096 ($c)" timeout 150 $S bench --model $M/l8b.gguf --devices cuda:0 --streams 1 --prompt-tokens 4096 \
    --max-tokens 16 --ctx 8192
done
IFS=: read -r STRATA_PROMPT_TILE STRATA_MMA_BM STRATA_SMM_WARPS <<< "${BEST:-512:64:8}"
check "prompt tile profile (${BEST:-512:64:8})" timeout 150 python3 tests/gpu/profile_stage.py $M/l8b.gguf prompt
summary
