#!/usr/bin/env bash
# Issues 11 / 12 / 14, session 44 (about 5 minutes): the table codes in IQ4_XS's layout at 8 x rows a pass
# (dp4a_gemv.TABLE_PASS_ROWS; the 8B IQ3_S one and eight streams against 4, a sampled batch-test at 8), and
# the prompt values as rows of 32 by default for kinds 8, 10, 12 (its kernel tests on the GPU; the 8B Q2_K
# prompt against STRATA_PROMPT_W32=0). Carry [".whl"]. Log: $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
check "prompt value tests" timeout 100 python3 -m pytest -q -p no:cacheprovider tests/engine/test_packed.py \
  -k "scale16 or (reads_the_layout and (Q2_K or Q6_K))"
$S make-model --arch llama --shape llama-3-8b --qtype IQ3_S --out $M/l8b.gguf >/dev/null
P="--streams 1,8 --parallel 8 --prompt-tokens 512 --max-tokens 48 --ctx 1024 --devices cuda:0"
check "bench 8b IQ3_S tables rb=4" env STRATA_IQ_TABLES=1 STRATA_DP4A_RB=4 timeout 60 $S bench --model $M/l8b.gguf $P
check "bench 8b IQ3_S tables rb=8 (default)" env STRATA_IQ_TABLES=1 timeout 60 $S bench --model $M/l8b.gguf $P
check "batch-test 8b IQ3_S tables sampled 8 slots" env STRATA_IQ_TABLES=1 $BT --model $M/l8b.gguf \
  --devices cuda:0 --parallel 8 --temperature 0.8 --seed 6
$S make-model --arch llama --shape llama-3-8b --qtype Q2_K --out $M/l8b.gguf >/dev/null
for f in 0 1; do
  check "prompt 8b Q2_K w32=$f" env STRATA_PROMPT_W32=$f timeout 50 $S bench --model $M/l8b.gguf --streams 1 \
    --parallel 1 --prompt-tokens 512 --max-tokens 16 --ctx 1024 --devices cuda:0
done
summary
