#!/usr/bin/env bash
# Issues 11 / 12: the bit planes written without a GPU (engine.kernels.packed, off until this measures them):
# QT=Q5_K (five_bit_planes, kind 11: 5.625 bits a weight, STRATA_Q5K_PLANES=1, against int8 codes: 10 bits),
# QT=Q3_K (three_bit_planes, kind 13: 3.5625 bits, STRATA_Q3K_PLANES=1, against int8 codes) or QT=Q2_K
# (two_bit_planes, kind 12: the file's 2.625 bits, STRATA_Q2K_PLANES=1, against the GGUF-layout kernel and,
# for expert stacks, the per-expert loop with host syncs). One type a call (about 5 minutes each).
# The kernel tests on the GPU; the llama-3-8b shape in that type one and eight streams each way (alternating,
# twice; planes at 4 and 8 x rows a pass), a sampled batch-test with planes; the small MoE in that type with
# planes, sampled, spec 3; the qwen3-30b-a3b shape one and four streams each way (Q2_K without planes: one
# stream, 32 tokens). If planes win: their default on (engine/model_info.py, engine/kernels/packed.py).
# Carry [".whl"]. Log: $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
QT=${QT:?QT=Q5_K, Q3_K or Q2_K}
FLAG=STRATA_${QT/_/}_PLANES                 # STRATA_Q5K_PLANES, ...
check "kernel tests $QT" timeout 300 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_packed.py tests/engine/test_dp4a_gemv.py tests/engine/test_moe_gemv.py -k "$QT"
$S make-model --arch llama --shape llama-3-8b --qtype $QT --out $M/l8b.gguf >/dev/null
for v in "0 4" "1 4" "0 4" "1 4" "1 8"; do
  set -- $v
  check "bench 8b $QT planes=$1 rb=$2" env $FLAG=$1 STRATA_DP4A_RB=$2 timeout 150 $S bench \
    --model $M/l8b.gguf --streams 1,8 --parallel 8 $B
done
check "batch-test 8b $QT planes sampled 8 slots" env $FLAG=1 $BT --model $M/l8b.gguf --devices cuda:0 --parallel 8 \
  --temperature 0.8 --seed 6
rm -f $M/l8b.gguf
$S make-model --arch qwen3moe --shape small --mtp 1 --qtype $QT --out $M/moe-p.gguf >/dev/null
check "batch-test moe small $QT planes sampled, spec 3" env $FLAG=1 $BT --model $M/moe-p.gguf --devices cuda:0 \
  --parallel 4 --draft mtp --spec 3 --temperature 0.8 --seed 3 --prompt-tokens 100
$S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype $QT --out /dev/shm/a3b-p.gguf >/dev/null
check "bench 30b-a3b $QT planes" env $FLAG=1 timeout 200 $S bench --model /dev/shm/a3b-p.gguf --streams 1,4 \
  --parallel 4 $B
if [ "$QT" = Q2_K ]; then
  check "bench 30b-a3b $QT GGUF layout, 1 stream" env $FLAG=0 timeout 200 $S bench --model /dev/shm/a3b-p.gguf \
    --streams 1 --parallel 1 --prompt-tokens 128 --max-tokens 32 --ctx 1024 --devices cuda:0
else
  check "bench 30b-a3b $QT int8 codes" env $FLAG=0 timeout 200 $S bench --model /dev/shm/a3b-p.gguf --streams 1,4 \
    --parallel 4 $B
fi
rm -f /dev/shm/a3b-p.gguf
summary
