#!/usr/bin/env bash
# Run HERE (not on the GPU box) before the GPU scripts: fills the ignored folder .whl/ with the wheels the
# GPU image lacks and the tiny synthetic models (they carry the tokenizer, since the default model is too
# big to carry). Then call the device tool with carry [".whl"] and e.g. `bash tests/gpu/run_verify.sh`.
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx "/.whl/" .git/info/exclude 2>/dev/null || echo "/.whl/" >> .git/info/exclude
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl gguf==0.19.0 msgspec platformdirs pyzmq llguidance
for a in llama qwen3moe gemma3; do .venv/bin/strata make-model --arch $a --shape tiny --mtp 1 --out .whl/$a.gguf; done
# next token through attention (x_{t+1} = x_{t-4}), MTP layer that agrees: engine/synthetic_induction.py
.venv/bin/strata make-model --arch llama --shape tiny --mtp 1 --weights induction --out .whl/induction.gguf
du -sh .whl
