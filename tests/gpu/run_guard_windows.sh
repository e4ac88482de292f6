#!/usr/bin/env bash
# Issue 17: where a lone request's wall time goes with the draft guard on, window by window
# (engine.window_log; summed by tests/gpu/window_log.py): the default model with its trained MTP layer,
# code and edit prompts, one stream, no drafts against --spec 4 under the guard, twice each, interleaved.
# After run_mtp_train.sh a (carry [".mdl/a"]), at once:
#   bash tests/gpu/run_guard_windows.sh   carry [".mdl/b", ".mdl/b.sha256", ".wheels", ".whl/llama.gguf"]
# or in one call on a synthetic model of the default model's shape with a random MTP layer (its drafts are
# rejected, so the guard pauses them: what paused windows cost beside plain ones):
#   SYNTH=1 bash tests/gpu/run_guard_windows.sh   carry [".wheels", ".whl/llama.gguf"]
# Logs to $OUT/log.txt, the window logs to $OUT/w-*.jsonl.
set -euo pipefail
mkdir -p .whl && cp .wheels/*.whl .whl/
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
D=/tmp/mdl; MD=$D/SmolLM2-135M-Instruct.Q4_1.gguf
if [ -n "${SYNTH:-}" ]; then
  MD=$M/smol-mtp.gguf
  $S make-model --arch llama --shape smollm2-135m --mtp 1 --qtype Q4_1 --out $MD >/dev/null
elif [ ! -f $MD ]; then
  [ -f $D/a ] || { echo "FAIL: the first half is gone (the machine went cold): call run_mtp_train.sh a again"; exit 1; }
  cat $D/a .mdl/b > $MD
  [ "$(sha256sum $MD | cut -d' ' -f1)" = "$(cat .mdl/b.sha256)" ] || { rm $MD; echo "FAIL: halves do not join"; exit 1; }
fi
nvidia-smi --query-gpu=name --format=csv,noheader
export STRATA_DRAFT_GUARD_LOG=1
G="timeout 120 $S bench --model $MD --devices cuda:0 --streams 1 --max-tokens ${MAXTOK:-512} --ctx 2048"
logged() {   # logged NAME bench-args...: a bench with its window log, then the log summed
  local name=$1; shift
  rm -f "$OUT/w-$name.jsonl"
  check "$name" env STRATA_WINDOW_LOG="$OUT/w-$name.jsonl" $G "$@"
  python3 tests/gpu/window_log.py "$OUT/w-$name.jsonl" | tail -n 12
}
KINDS=${KINDS:-code edit}; [ -z "${SYNTH:-}" ] || KINDS=${KINDS_SYNTH:-code}   # (random drafts: one kind says it)
for round in 1 2; do
  step "round $round"
  for kind in $KINDS; do
    logged "$kind-plain-$round" --prompt-kind $kind
    logged "$kind-guard-$round" --prompt-kind $kind --spec 4
  done
done
export STRATA_DRAFT_GUARD=0
logged "code-every" --prompt-kind code --spec 4
summary
