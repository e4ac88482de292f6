#!/usr/bin/env bash
# Issues 11 / 12, session 43: the grid i-quants as 4-bit codes into a table of 16 values (STRATA_IQ_TABLES=1:
# IQ3_XXS, IQ3_S, IQ2_XXS, IQ1_S in IQ4_XS's layout, kind 6, 4.375 bits a weight; IQ2_XS, IQ2_S, IQ1_M with
# a scale per 16, kind 14, 4.625 bits; engine.kernels.iq4.TABLE_VALUES) against their int8 planes / codes
# (kinds 1 and 8, 9 and 10 bits). The kernel tests with it on, the 8B matrices each way, small MoE
# batch-tests, the llama-3-8b shape IQ3_S and IQ2_XS one and eight streams each way, the qwen3-30b-a3b
# shape IQ2_XS one and four streams each way (on by default since session 44). Carry [".whl"]. Log: $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
check "kernel tests, table codes" env STRATA_IQ_TABLES=1 timeout 150 python3 -m pytest -q -p no:cacheprovider -x \
  tests/engine/test_packed.py tests/engine/test_dp4a_gemv.py tests/engine/test_moe_gemv.py -k "table or IQ1_M"
for f in 0 1; do
  check "kernels tables=$f" env STRATA_IQ_TABLES=$f timeout 90 python3 tests/gpu/bench_matmul.py --no-checks \
    --types IQ3_S,IQ2_XS --matrices "gate|up,down"
done
for qt in IQ3_XXS IQ1_S IQ2_XS; do
  $S make-model --arch qwen3moe --shape small --qtype $qt --out $M/moe-$qt.gguf >/dev/null
  check "batch-test moe small $qt tables, sampled" env STRATA_IQ_TABLES=1 timeout 60 $S batch-test \
    --max-tokens 16 --model $M/moe-$qt.gguf --devices cuda:0 --parallel 4 --temperature 0.8 --seed 3
done
for qt in IQ3_S IQ2_XS; do
  $S make-model --arch llama --shape llama-3-8b --qtype $qt --out $M/l8b.gguf >/dev/null
  for f in 0 1; do
    check "bench 8b $qt tables=$f" env STRATA_IQ_TABLES=$f timeout 60 $S bench --model $M/l8b.gguf --streams 1,8 \
      --parallel 8 --prompt-tokens 512 --max-tokens 48 --ctx 1024 --devices cuda:0
  done
done
check "batch-test 8b IQ2_XS tables sampled 8 slots" env STRATA_IQ_TABLES=1 $BT --model $M/l8b.gguf \
  --devices cuda:0 --parallel 8 --temperature 0.8 --seed 6
rm -f $M/l8b.gguf
$S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype IQ2_XS --out /dev/shm/a3b.gguf >/dev/null
for f in 0 1; do
  check "bench 30b-a3b IQ2_XS tables=$f" env STRATA_IQ_TABLES=$f timeout 70 $S bench --model /dev/shm/a3b.gguf \
    --streams 1,4 --parallel 4 --prompt-tokens 512 --max-tokens 32 --ctx 1024 --devices cuda:0
done
rm -f /dev/shm/a3b.gguf
summary
