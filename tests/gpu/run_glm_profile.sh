#!/usr/bin/env bash
# Issue 16 / 12: where a decode window's time goes on the glm4moe GLM-4.5-Air-shape file (IQ4_XS experts;
# 2026-12-06 on an H100: one stream 106.9 tok/s, 9.35 ms a window, llama.cpp tg128 161.1 on the same file).
# One stream's bench, the decode tile's graph by kernel at 1 and 4 real rows (profile_stage.py), then one MoE layer's kernels
# alone (bench_moe.py, layer 1). QTYPE_MAP='*_exps.weight=Q4_K' makes the experts Q4_K (63 GB: /dev/shm holds
# it) to see what IQ4_XS's lookups cost. Carry [".whl"]. Log: $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
glm_air; F=$GLM
check "bench glm-4.5-air 1 stream" timeout 150 $S bench --model $F --devices cuda:0 --streams 1 --parallel 1 \
  --max-tokens 64 --prompt-tokens 512 --ctx 2048
check "profile_stage glm-4.5-air 1 4" timeout 200 python3 tests/gpu/profile_stage.py $F 1 4
check "bench_moe glm-4.5-air layer 1" timeout 200 python3 tests/gpu/bench_moe.py $F 1
summary
