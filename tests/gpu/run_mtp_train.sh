#!/usr/bin/env bash
# Issue 17 on the GPU: train the default model's MTP layer there (more model text than this 2-core
# machine can write) and measure its acceptance. Prepare here with tests/gpu/prepare_default_model.sh,
# then calls on one warm machine (it keeps /tmp/mdl between calls; go on at once, it leaves after 30 s idle):
#   bash tests/gpu/run_mtp_train.sh a     carry [".mdl/a"]                              (the first half)
#   bash tests/gpu/run_mtp_train.sh b     carry [".mdl/b", ".mdl/b.sha256", ".wheels"]  (joins, writes, trains)
#   bash tests/gpu/run_mtp_train.sh c     carry [".wheels"]                             (measures)
# or, to measure the shipped layer without training: a, then j (carry as b: joins only), then c.
# b saves the model text as it goes and the layer every 50 steps: if a call runs out of time, call b
# again and it continues. Its log streams to $OUT/train.log. TOKENS / STEPS / SEQ / BATCH / STREAMS / LR (env)
# size the run; TEXT=stdlib adds the machine's Python standard library as --text (TEXT_TOKENS of it), any
# other TEXT is a path.
# The shipped layer (2026-12-04): TEXT=stdlib TEXT_TOKENS=1500000 TOKENS=600000 STREAMS=32 STEPS=3500 BATCH=32
# LR=7e-4 LIMIT=545 (stopped at step 2,305), then the same with STEPS=2600 (resumed, annealed to 2,600).
# The layer comes back in $OUT (copy it to engine/mtp/); c prints strata bench's acceptance by position,
# solo and 4 streams, for code / prose / edit prompts, and a sampled batch-test with the layer.
set -euo pipefail
D=/tmp/mdl; mkdir -p $D
NAME=SmolLM2-135M-Instruct.Q4_1
if [ "${1:-}" = a ]; then cp .mdl/a $D/a; ls -la $D; exit 0; fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .wheels/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-./gpu-out}; mkdir -p "$OUT"
S="python3 -m app.cli"
if [ "${1:-}" = b ] || [ "${1:-}" = j ]; then
  if [ ! -f $D/$NAME.gguf ]; then
    [ -f $D/a ] || { echo "FAIL: the first half is gone (the machine went cold): call a again, then b at once"; exit 1; }
    cat $D/a .mdl/b > $D/$NAME.gguf
    [ "$(sha256sum $D/$NAME.gguf | cut -d' ' -f1)" = "$(cat .mdl/b.sha256)" ] || { rm $D/$NAME.gguf; echo "FAIL: halves do not join"; exit 1; }
  fi
  [ "$1" = j ] && { echo "joined: $D/$NAME.gguf (c measures it with the layer shipped in engine/mtp/)"; exit 0; }
  nvidia-smi --query-gpu=name --format=csv,noheader
  EXTRA=()
  if [ -n "${TEXT:-}" ]; then
    [ "$TEXT" = stdlib ] && TEXT=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
    EXTRA=(--text "$TEXT" --text-tokens "${TEXT_TOKENS:-1000000}")
  fi
  time timeout "${LIMIT:-560}" $S mtp-train --model $D/$NAME.gguf --out $D/$NAME.mtp.gguf --sidecar --device cuda:0 \
    --tokens "${TOKENS:-300000}" --seq-tokens "${SEQ:-256}" --steps "${STEPS:-4000}" --batch "${BATCH:-8}" \
    --lr "${LR:-5e-4}" --streams "${STREAMS:-16}" "${EXTRA[@]}" 2>&1 | tr '\r' '\n' > "$OUT/train.log"
  grep -v "it/s\]$\|step/s\|seq/s\]\|tok/s\]" "$OUT/train.log" | tail -20
  cp $D/$NAME.mtp.gguf "$OUT/"
  exit 0
fi
[ "${1:-}" = c ] || { echo "usage: run_mtp_train.sh a|b|j|c"; exit 2; }
# for each prompt kind --spec 4 (SPECS: the --spec values) with the draft guard (engine.draft_guard: on by
# default here) and no drafts at all; then --spec 4 without the guard on code
for kind in code prose edit; do
  for spec in ${SPECS:-4} 1; do
    $S bench --model $D/$NAME.gguf --devices cuda:0 --streams 1,4 --parallel 4 --spec $spec --prompt-kind $kind \
      --max-tokens ${MAXTOK:-512} --ctx 2048 2>&1 | grep -v "^#.*memory"
  done
done
STRATA_DRAFT_GUARD=0 $S bench --model $D/$NAME.gguf --devices cuda:0 --streams 1,4 --parallel 4 --spec 4 \
  --prompt-kind code --max-tokens ${MAXTOK:-512} --ctx 2048 2>&1 | grep -v "^#.*memory"
$S batch-test --model $D/$NAME.gguf --devices cuda:0 --parallel 4 --spec 4 --max-tokens 32 --temperature 0.8 --seed 3
