#!/usr/bin/env bash
# llama.cpp's source for the GPU machine, to measure it beside the engine on the same files (issues 11, 12,
# 15, 16): the copy vendored in llama-cpp-python's sdist (0.3.36, llama.cpp commit 0c1e570), trimmed to
# travel (models, docs, media, gguf-py, the web UI, tests, benches, the SYCL / Vulkan / OpenCL backends):
# .llamacpp/src.tgz, about 7 MB (it configures here with the server, tests and examples off). Then
# run tests/gpu/run_llama_cpp.sh there with carry [".llamacpp", ".whl/llama.gguf", the four .whl wheels].
set -euo pipefail
cd "$(dirname "$0")/../.."
D=$(mktemp -d)
pip download -q --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d "$D"
tar xzf "$D"/llama_cpp_python-0.3.36.tar.gz -C "$D"
mv "$D"/llama_cpp_python-0.3.36/vendor/llama.cpp "$D"/llama.cpp
( cd "$D"/llama.cpp && rm -rf models docs media gguf-py tools/ui benches tests ggml/src/ggml-sycl ggml/src/ggml-vulkan \
    ggml/src/ggml-opencl .git* )
mkdir -p .llamacpp
tar czf .llamacpp/src.tgz -C "$D" llama.cpp
rm -rf "$D"
grep -qx '/.llamacpp/' .git/info/exclude 2>/dev/null || echo '/.llamacpp/' >> .git/info/exclude
ls -la .llamacpp/src.tgz
