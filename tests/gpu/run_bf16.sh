#!/usr/bin/env bash
# Issue 11: the bfloat16 tensor-core decode kernel (Q4_K dequantized in registers): its GPU tests, its
# checks and sweep beside dp4a and imma on the 8B shapes (rows 1, 4, 8, 16; both asm widths,
# STRATA_BF16_PACK 4 and 2), and (E2E=1) exactness and the 8B decode benches (auto = dp4a, bf16, bf16 with 2
# codes per asm call), SmolLM2's one stream.
set -euo pipefail
source "$(dirname "$0")/env.sh"
check "bf16 + imma + attention tests on GPU" timeout 150 python3 -m pytest -q -p no:cacheprovider -x \
  tests/engine/test_bf16_decode.py tests/engine/test_imma_matmul.py tests/engine/test_attention_kernel.py
check "Q4_K checks (bf16 beside dp4a, imma)" timeout 120 python3 tests/gpu/bench_matmul.py --check-types Q4_K --only none
[ -n "${NO_SWEEP:-}" ] || check "bf16 sweep" timeout 330 python3 tests/gpu/bench_matmul.py --no-checks --only llama-3-8b \
  --sweep-bf16 --matrices "${MATRICES:-gate|up,down,qkv,wo}" --json "$OUT/bf16.json"
if [ -n "${E2E:-}" ]; then
  $S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
  $S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf >/dev/null
  $S make-model --arch llama --shape small --mtp 1 --qtype Q4_K --out $M/mtp.gguf >/dev/null
  BT="timeout 150 $S batch-test --max-tokens 16"
  check "batch-test 8b bf16 parallel 8 sampled" $BT --model $M/l8b.gguf --devices cuda:0 --parallel 8 \
    --temperature 0.8 --seed 3 --decode-kernel bf16
  check "batch-test 8b 2 stages split 12, 2 groups (dp4a) sampled" $BT --model $M/l8b.gguf --devices cuda:0,cuda:0 \
    --layer-split 12 --parallel 4 --batch-groups 2 --temperature 0.7 --seed 5
  check "batch-test small Q4_K bf16 spec 3 sampled" $BT --model $M/mtp.gguf --devices cuda:0 --parallel 4 \
    --draft mtp --spec 3 --temperature 0.8 --seed 3 --decode-kernel bf16
  B8="timeout 200 $S bench --model $M/l8b.gguf --devices cuda:0 --streams 1,8 --parallel 8 --prompt-tokens 512 --max-tokens 128 --ctx 2048"
  check "bench 8b 1,8 (auto: dp4a)" $B8
  check "bench 8b 1,8 bf16" $B8 --decode-kernel bf16
  check "batch-test 8b bf16 pack 2 parallel 8 sampled" env STRATA_BF16_PACK=2 $BT --model $M/l8b.gguf --devices cuda:0 \
    --parallel 8 --temperature 0.8 --seed 3 --decode-kernel bf16
  check "bench 8b 1,8 bf16 pack 2" env STRATA_BF16_PACK=2 $B8 --decode-kernel bf16
  check "bench smol 1 (attention chunks)" timeout 100 $S bench --model $M/smol.gguf --devices cuda:0 --streams 1 \
    --prompt-tokens 512 --max-tokens 128 --ctx 2048
fi
summary
