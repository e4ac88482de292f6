#!/usr/bin/env bash
# Issues 11 / 12, session 42: the bit planes' kernels alone, after run_planes.sh measured them end to end
# (Q2_K planes: one 8B stream 129 -> 442 tok/s but eight streams 996 -> 795; Q5_K planes: decode ahead but the
# 512-token prompt 11,149 -> 9,855 tok/s). The llama-3-8b matrices at 1, 4, 8, 16 rows and the 128-row prompt
# tile, every planes type on, rows a pass 1/2/4/8 swept; Q5_K and Q3_K again as int8 codes (planes off) for
# the prompt tile; the 8B Q2_K decode windows at 1, 2, 4, 8 rows with planes on and off. Carry [".whl"].
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
export STRATA_Q5K_PLANES=1 STRATA_Q3K_PLANES=1 STRATA_Q2K_PLANES=1
check "planes kernels, rows a pass swept" timeout 240 python3 tests/gpu/bench_matmul.py --no-checks --sweep-rb \
  --types Q2_K,Q3_K,Q5_K,Q6_K,Q4_K --matrices "gate|up,down,qkv"
check "int8 codes Q5_K / Q3_K" env STRATA_Q5K_PLANES=0 STRATA_Q3K_PLANES=0 timeout 120 python3 tests/gpu/bench_matmul.py \
  --no-checks --types Q5_K,Q3_K --matrices "gate|up,down"
$S make-model --arch llama --shape llama-3-8b --qtype Q2_K --out $M/l8b.gguf >/dev/null
for f in 1 0; do
  check "decode windows 8b Q2_K planes=$f" env STRATA_Q2K_PLANES=$f timeout 150 python3 tests/gpu/profile_stage.py \
    $M/l8b.gguf 1 2 4 8
done
summary
