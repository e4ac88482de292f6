#!/usr/bin/env bash
# Issues 11 / 17, measured and dropped (H100, 2026-12-06): a decode tile of 8 rows for windows of 2-8 rows
# (a few streams, a slot's draft window) beside the 16-row one. Compiled for sm_90, the Q4_K tensor-core kernel
# holds 168 registers in a tile of at most 8 rows (one pass) against 255 in a 16-row tile (TWO: both passes
# in one sweep), yet the 8-row tile was the slower: gate|up 28672x4096 at 8:2 / 8:4 / 8 rows 42.9 / 42.1 /
# 40.9 us against 34.4 / 34.3 / 34.1 at 16:2 / 16:4 / 16:8; an 8B tile with 4 real rows 3,348 us a replay
# against 3,072 in the 16-row tile (profile_stage.py TILE=8 / 16). The tile (TileSizes.mid) was taken out.
#   bash tests/gpu/run_mid_tile.sh     carry [".wheels", ".whl/llama.gguf"]
set -euo pipefail
mkdir -p .whl && cp .wheels/*.whl .whl/
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
step "Q4_K kernel by tile:real rows"
check "bench_q4k_mma" timeout 240 python3 tests/gpu/bench_q4k_mma.py --rows 1,8:2,8:4,8,16:2,16:4,16:8,16 \
  --shapes "qkv,wo,gate|up,down"
for t in 8 16; do
  step "8B, 4 and 8 real rows in a $t-row tile"
  check "profile tile $t" env TILE=$t timeout 150 python3 tests/gpu/profile_stage.py $M/l8b.gguf 4 8
done
summary
