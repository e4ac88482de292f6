#!/usr/bin/env bash
# Issue 17's "a lone request never slower with drafts on": the default model with its trained MTP layer,
# drafts under the guard against none in one process a stream count (tests/gpu/guard_ab.py: the two sides
# share the process's pace), and every guarded request checked token for token (tests/gpu/guard_tokens.py).
# After run_mtp_train.sh a (carry [".mdl/a"]), at once:
#   bash tests/gpu/run_guard_ab.sh   carry [".mdl/b", ".mdl/b.sha256", ".wheels"]
# ROUNDS (default 4), STREAMS (default "1 4"), KINDS (default code,prose,edit); CHECK=0 skips the token check
# (a second call on the same warm machine). Log: $OUT/log.txt.
set -euo pipefail
bash "$(dirname "$0")/run_mtp_train.sh" j
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-./gpu-out}; mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
MD=/tmp/mdl/SmolLM2-135M-Instruct.Q4_1.gguf
nvidia-smi --query-gpu=name --format=csv,noheader
rc=0
[ "${CHECK:-1}" = 0 ] || timeout 150 python3 tests/gpu/guard_tokens.py $MD --kinds "${KINDS:-code,prose,edit}" 2>&1 | grep -v "^draft guard" || rc=1
for n in ${STREAMS:-1 4}; do
  timeout 280 python3 tests/gpu/guard_ab.py $MD --streams "$n" --rounds "${ROUNDS:-4}" \
    --kinds "${KINDS:-code,prose,edit}" 2>&1 | grep -v "^draft guard" || rc=1
done
exit $rc
