#!/usr/bin/env bash
# Issue 16: llama.cpp beside the engine on the glm4moe GLM-4.5-Air-shape file (IQ4_XS experts, in /dev/shm as
# run_glm_real.sh makes it): llama-bench pp512 / tg128 (one stream, all layers on the GPU). The engine's figures
# on the same file: run_glm_real.sh. Carry [".whl", ".llamacpp"] (tests/gpu/prepare_llama_cpp.sh); the
# llama.cpp build takes about 3 minutes (run_llama_cpp.sh BUILD_ONLY=1). Log: $OUT/log.txt.
set -euo pipefail
BUILD_ONLY=1 bash "$(dirname "$0")/run_llama_cpp.sh"
source "$(dirname "$0")/env.sh"
exec > >(tee -a "$OUT/log.txt") 2>&1
glm_air
check "llama-bench glm-4.5-air" timeout 300 /tmp/llama.cpp/build/bin/llama-bench -m $GLM -ngl 99 -p 512 -n 128 -r 2
summary
