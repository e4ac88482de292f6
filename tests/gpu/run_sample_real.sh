#!/usr/bin/env bash
# Issue 11: sampled decoding on the default model (real logits) against greedy, one stream: strata bench's
# chained share and window time, and profile_host.py's host parts and kernels per step at T 0 and 0.8.
# PROFILE_ONLY=1: the profiles alone. After run_mtp_train.sh a and j (the model joined in /tmp/mdl on the warm machine); carry [".wheels"].
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .wheels/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
N=/tmp/mdl/SmolLM2-135M-Instruct.Q4_1.gguf; S="python3 -m app.cli"
ls $N >/dev/null || { echo "FAIL: the model is not joined (run_mtp_train.sh a, then j)"; exit 1; }
for t in 0 0.8; do
  echo "=== T $t"
  [ -n "${PROFILE_ONLY:-}" ] || timeout 100 $S bench --model $N --devices cuda:0 --streams 1 --prompt-kind prose --max-tokens 256 --ctx 2048 \
    --temperature $t 2>&1 | grep -v "^#.*memory" | tail -2
  TEMP=$t timeout 120 python3 tests/gpu/profile_host.py $N 60 2>&1 | tail -28
done
