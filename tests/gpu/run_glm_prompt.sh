#!/usr/bin/env bash
# Issue 12 / 16: where GLM-4.5-Air's prompt tile goes (IQ4_XS experts; 2026-12-06 on an H100: 2,079 tok/s
# reading 512 tokens against llama.cpp pp512 3,217), then whether the Q4_K-expert file (down experts Q5_0,
# now on the int8 kernels) fits one 80 GB card and what one stream reads. One 60 GB file at a time in
# /dev/shm. Carry [".whl"]. Log: $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
glm_air; F=$GLM
check "profile_stage glm-4.5-air prompt" timeout 200 python3 tests/gpu/profile_stage.py $F prompt
rm -f $F
QTYPE_MAP='*_exps.weight=Q4_K'; glm_air; F=$GLM
check "bench glm-4.5-air Q4_K experts 1 stream" timeout 200 $S bench --model $F --devices cuda:0 --streams 1 \
  --parallel 1 --max-tokens 64 --prompt-tokens 512 --ctx 2048
rm -f $F
summary
