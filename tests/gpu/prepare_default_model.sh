#!/usr/bin/env bash
# Run HERE: the default model (98 MB) is over one device call's 64 MiB, so it travels in two halves:
# .mdl/a with `bash tests/gpu/run_mtp_train.sh a` (carry [".mdl/a"]), then .mdl/b with the wheels in
# `bash tests/gpu/run_mtp_train.sh b` (carry [".mdl/b", ".mdl/b.sha256", ".wheels"]) on the still-warm machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
for d in /.mdl/ /.wheels/; do grep -qx "$d" .git/info/exclude || echo "$d" >> .git/info/exclude; done
M=$(.venv/bin/python -c "from engine.model_files import default_model_path as d; print(d())")
rm -rf .mdl .wheels && mkdir -p .mdl .wheels
split -n 2 -d "$M" .mdl/part && mv .mdl/part00 .mdl/a && mv .mdl/part01 .mdl/b
sha256sum "$M" | cut -d' ' -f1 > .mdl/b.sha256
ls .whl/*.whl >/dev/null 2>&1 || bash tests/gpu/prepare.sh
cp .whl/*.whl .wheels/
du -sh .mdl/* .wheels
