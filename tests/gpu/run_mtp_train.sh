#!/usr/bin/env bash
# Issue 17 on the GPU: train the default model's MTP layer there (more model text than this 2-core
# machine can write) and measure its acceptance. Prepare here with tests/gpu/prepare_default_model.sh,
# then two calls on one warm machine:
#   bash tests/gpu/run_mtp_train.sh a     carry [".mdl/a"]              (keeps the first half in /tmp/mdl)
#   bash tests/gpu/run_mtp_train.sh b     carry [".mdl/b", ".mdl/b.sha256", ".wheels"]   (joins, trains, measures)
# TOKENS / STEPS / SEQ (env) size the run. The layer comes back in $OUT (copy it to engine/mtp/), with
# the held-out figures and strata bench's acceptance by position, solo and 4 streams, code/prose/edit.
set -euo pipefail
D=/tmp/mdl; mkdir -p $D
if [ "${1:-}" = a ]; then cp .mdl/a $D/a; ls -la $D; exit 0; fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .wheels/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-./gpu-out}; mkdir -p "$OUT"
NAME=SmolLM2-135M-Instruct.Q4_1
cat $D/a .mdl/b > $D/$NAME.gguf
[ "$(sha256sum $D/$NAME.gguf | cut -d' ' -f1)" = "$(cat .mdl/b.sha256)" ] || { echo "FAIL: halves do not join"; exit 1; }
S="python3 -m app.cli"
nvidia-smi --query-gpu=name --format=csv,noheader
time $S mtp-train --model $D/$NAME.gguf --out $D/$NAME.mtp.gguf --sidecar --device cuda:0 \
  --tokens "${TOKENS:-300000}" --seq-tokens "${SEQ:-256}" --steps "${STEPS:-6000}" --batch 8 --lr 5e-4 2>&1 \
  | tr '\r' '\n' | grep -v "it/s\]$\|step/s\|seq/s\]\|tok/s\]" | tail -20
cp $D/$NAME.mtp.gguf "$OUT/"
for kind in code prose edit; do
  $S bench --model $D/$NAME.gguf --devices cuda:0 --streams 1,4 --parallel 4 --spec 4 --prompt-kind $kind \
    --max-tokens 128 --ctx 2048 2>&1 | grep -v "^#.*memory"
done
$S bench --model $D/$NAME.gguf --devices cuda:0 --streams 1,4 --parallel 4 --prompt-kind code --max-tokens 128 --ctx 2048
$S batch-test --model $D/$NAME.gguf --devices cuda:0 --parallel 4 --spec 4 --max-tokens 32 --temperature 0.8 --seed 3
