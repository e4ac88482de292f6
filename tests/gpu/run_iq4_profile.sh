#!/usr/bin/env bash
# Issue 15, session 16: where IQ4_XS one-row decode time goes. The 8B IQ4_XS shape decodes one stream at
# 316 tok/s (3.16 ms a window for a 3.74 GB file: ~1.2 TB/s) where Q4_K reads its 4.6 GB at 2.1 ms.
# The matmul table for IQ4_XS beside Q4_K (1-16 rows, with the (warps, rows per thread) sweep), Nsight
# Compute on the gate|up call at one row for both types, and the decode tile's kernels. Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "matmul IQ4 sweep" timeout 200 python3 tests/gpu/bench_matmul.py --iq4 --no-checks --only llama-3-8b \
  --matrices "gate|up,down,qkv" --sweep
check "matmul Q4_K" timeout 120 python3 tests/gpu/bench_matmul.py --no-checks --only llama-3-8b --matrices "gate|up,down,qkv"
for q in IQ4_XS Q4_K; do
  check "ncu dp4a $q gate|up 1 row" timeout 120 ncu --clock-control none -k regex:dp4a --launch-skip 4 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy \
    --section LaunchStats env QTYPE=$q KERNEL=dp4a ROWS=1 python3 tests/gpu/ncu_imma.py
done
$S make-model --arch llama --shape llama-3-8b --qtype IQ4_XS --out $M/l8b-iq4.gguf >/dev/null
check "decode tile 8b IQ4_XS" timeout 150 python3 tests/gpu/profile_stage.py $M/l8b-iq4.gguf 1 8
summary
