#!/usr/bin/env bash
# llama.cpp beside the engine on the GPU machine, on the same `strata make-model` files: llama-bench
# (pp512, tg128, one stream) and llama-batched-bench (128 prompt + 128 generated tokens, 1 and 8 streams).
# Prepare here with tests/gpu/prepare_llama_cpp.sh; carry [".llamacpp", ".whl/llama.gguf", the wheels].
# The build (CUDA, sm_90, the two targets only) takes about 3 minutes and stays in /tmp/llama.cpp while the
# machine is warm. QTYPES (default "Q4_K IQ4_XS IQ3_S") picks the 8B shape's types; MOE=1 adds the
# qwen3-30b-a3b shape in Q4_K, HYBRID=1 the qwen3.5-9b shape. The build's log: $OUT/llama_cpp_build.log.
# BUILD_ONLY=1 builds and stops (run it in the background of another call); ENGINE=1 also runs `strata bench`
# on each file right after llama.cpp (1 and 8 streams, a 512-token prompt, 128 tokens), same call, same GPU.
set -euo pipefail
L=/tmp/llama.cpp OUT=${OUT:-./gpu-out}; mkdir -p "$OUT"
if [ ! -x $L/build/bin/llama-bench ]; then
  rm -rf $L && tar xzf .llamacpp/src.tgz -C /tmp
  cmake -S $L -B $L/build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF > "$OUT/llama_cpp_build.log" 2>&1
  start=$(date +%s)
  cmake --build $L/build -j "$(nproc)" --target llama-bench llama-batched-bench >> "$OUT/llama_cpp_build.log" 2>&1 \
    || { tail -30 "$OUT/llama_cpp_build.log"; echo "FAIL: llama.cpp build"; exit 1; }
  echo "llama.cpp built in $(( $(date +%s) - start )) s"
fi
[ -n "${BUILD_ONLY:-}" ] && exit 0     # (before env.sh: this needs only .llamacpp)
source "$(dirname "$0")/env.sh"
files=()
for q in ${QTYPES:-Q4_K IQ4_XS IQ3_S}; do
  $S make-model --arch llama --shape llama-3-8b --qtype $q --out $M/l8b-$q.gguf >/dev/null; files+=($M/l8b-$q.gguf)
done
$S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf >/dev/null; files+=($M/smol.gguf)
if [ -n "${MOE:-}" ]; then
  $S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype Q4_K --out $M/q30.gguf >/dev/null; files+=($M/q30.gguf)
fi
if [ -n "${HYBRID:-}" ]; then
  $S make-model --arch qwen35 --shape qwen3.5-9b --qtype Q4_K --out $M/q35.gguf >/dev/null; files+=($M/q35.gguf)
fi
for f in "${files[@]}"; do
  n=$(basename $f .gguf)
  check "llama-bench $n" timeout 240 $L/build/bin/llama-bench -m $f -ngl 99 -p 512 -n 128 -r 3 -o md
  check "llama-batched-bench $n" tail_of 6 timeout 240 $L/build/bin/llama-batched-bench -m $f -ngl 99 -c 4096 \
    -npp 128 -ntg 128 -npl 1,8
  [ -z "${ENGINE:-}" ] || check "strata bench $n" timeout 240 $S bench --model $f --devices cuda:0 --streams 1,8 \
    --parallel 8 --prompt-tokens 512 --max-tokens 128 --ctx 2048
done
summary
