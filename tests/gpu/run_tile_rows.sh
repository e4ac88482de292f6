#!/usr/bin/env bash
# Issue 17 / 11: a decode tile's cost by real rows and tile size (tests/gpu/bench_tile_rows.py): whether a
# 2-, 4- or 8-row tile would make a draft window's trunk (2-5 real rows in the 16-row tile today) cheaper.
# On the smollm2-135m shape Q4_1, and with L8B=1 the llama-3-8b shape Q4_K too.
#   bash tests/gpu/run_tile_rows.sh     carry [".wheels", ".whl/llama.gguf"]
set -euo pipefail
mkdir -p .whl && cp .wheels/*.whl .whl/
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
$S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf >/dev/null
check "smollm2-135m shape" timeout 180 python3 tests/gpu/bench_tile_rows.py $M/smol.gguf
if [ -n "${L8B:-}" ]; then
  $S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
  check "llama-3-8b shape" timeout 240 python3 tests/gpu/bench_tile_rows.py $M/l8b.gguf
fi
summary
