#!/usr/bin/env bash
# Issues 11 / 12 / 14, session 42: the planes on by default (Q5_K, Q3_K, Q2_K since run_planes.sh measured them),
# the prompt tile's Q5_K fifth bits and Q3_K third bits read as two words and a select (they were a byte
# gather per value: Q5_K planes' 128-row gate|up tile 801 us against 330 as int8 codes), Q2_K at 2 x rows a
# pass. Kernels (128-row tiles beside 1-16 rows), the 8B Q5_K prompt and decode with planes on and off, the
# 8B Q2_K at 8 streams at 2 and 4 rows a pass, the qwen3-30b-a3b Q5_K prompt, sampled batch-tests with the
# defaults. Carry [".whl"]. Log: $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
check "planes kernels (prompt tiles)" timeout 150 python3 tests/gpu/bench_matmul.py --no-checks \
  --types Q5_K,Q3_K,Q6_K --matrices "gate|up,down"
P="--streams 1,8 --parallel 8 --prompt-tokens 512 --max-tokens 48 --ctx 1024 --devices cuda:0"
$S make-model --arch llama --shape llama-3-8b --qtype Q5_K --out $M/l8b.gguf >/dev/null
for f in 1 0; do
  check "bench 8b Q5_K planes=$f" env STRATA_Q5K_PLANES=$f timeout 90 $S bench --model $M/l8b.gguf $P
done
check "batch-test 8b Q5_K sampled 8 slots" $BT --model $M/l8b.gguf --devices cuda:0 --parallel 8 --temperature 0.8 --seed 6
$S make-model --arch llama --shape llama-3-8b --qtype Q2_K --out $M/l8b.gguf >/dev/null
for rb in 2 4; do
  check "bench 8b Q2_K rb=$rb" env STRATA_DP4A_RB=$rb timeout 90 $S bench --model $M/l8b.gguf $P
done
check "batch-test 8b Q2_K sampled 8 slots" $BT --model $M/l8b.gguf --devices cuda:0 --parallel 8 --temperature 0.8 --seed 6
rm -f $M/l8b.gguf
$S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype Q5_K --out /dev/shm/a3b-p.gguf >/dev/null
check "bench 30b-a3b Q5_K" timeout 120 $S bench --model /dev/shm/a3b-p.gguf --streams 1 --parallel 1 --prompt-tokens 512 \
  --max-tokens 48 --ctx 1024 --devices cuda:0
summary
