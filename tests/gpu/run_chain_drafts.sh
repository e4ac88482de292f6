#!/usr/bin/env bash
# Issue 17 / 13: chained draft windows (engine.draft_chain) on one GPU. First the CPU tests that compare
# them token for token with the host's draft windows, run here on the GPU (graphs, device positions);
# then one stream, --spec 4, drafts every window (STRATA_DRAFT_GUARD=0), the host's draft windows
# (STRATA_CHAIN_DRAFTS=0) against chained ones, beside no drafts, with window logs:
#  - smollm2-135m shape with a random MTP layer (every draft rejected: the cost of a draft window);
#  - smollm2-135m shape counting model (every draft kept: 5 tokens a window);
#  - then the guard (auto) on each.
#   bash tests/gpu/run_chain_drafts.sh     carry [".wheels", ".whl/llama.gguf"]
# ROUNDS (2), SPECS ("4": the --spec values), NO_GUARD=1 (no guard runs), HOST=0 (no host draft windows) size it.
# REAL=1: the real default model with its trained layer alone, no tests: after
# run_mtp_train.sh a (carry [".mdl/a"]), at once:
#   REAL=1 bash tests/gpu/run_chain_drafts.sh   carry [".mdl/b", ".mdl/b.sha256", ".wheels", ".whl/llama.gguf"]
set -euo pipefail
mkdir -p .whl && cp .wheels/*.whl .whl/
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
D=/tmp/mdl; REAL_MODEL=$D/SmolLM2-135M-Instruct.Q4_1.gguf
if [ -n "${REAL:-}" ] && [ ! -f $REAL_MODEL ]; then
  [ -f $D/a ] || { echo "FAIL: the first half is gone (the machine went cold): call run_mtp_train.sh a again"; exit 1; }
  cat $D/a .mdl/b > $REAL_MODEL
  [ "$(sha256sum $REAL_MODEL | cut -d' ' -f1)" = "$(cat .mdl/b.sha256)" ] || { rm $REAL_MODEL; echo "FAIL: halves do not join"; exit 1; }
fi
[ -n "${REAL:-}" ] || check "chained draft tests on the GPU" tail_of 30 timeout 300 python3 -m pytest -q -p no:cacheprovider -x \
  tests/engine/test_draft_chain.py tests/engine/test_chaining.py tests/engine/test_draft_guard.py
$S make-model --arch llama --shape smollm2-135m --mtp 1 --qtype Q4_1 --out $M/smol-mtp.gguf >/dev/null
$S make-model --arch llama --shape smollm2-135m --mtp 1 --qtype Q4_1 --weights counting --out $M/smol-count.gguf \
  >/dev/null || $S make-model --arch llama --shape small --mtp 1 --weights counting --out $M/smol-count.gguf >/dev/null
G="timeout 120 $S bench --devices cuda:0 --streams 1 --max-tokens ${MAXTOK:-512} --ctx 2048 --prompt-kind code"
logged() {   # logged NAME MODEL bench-args...: a bench with its window log, then the log summed
  local name=$1 model=$2; shift 2
  rm -f "$OUT/w-$name.jsonl"
  check "$name" env STRATA_WINDOW_LOG="$OUT/w-$name.jsonl" $G --model "$model" "$@"
  python3 tests/gpu/window_log.py "$OUT/w-$name.jsonl" | tail -n 8
}
MODELS="random:$M/smol-mtp.gguf count:$M/smol-count.gguf"
[ -z "${REAL:-}" ] || MODELS="real:$REAL_MODEL"
for round in $(seq 1 ${ROUNDS:-2}); do
  for nm in $MODELS; do
    name=${nm%%:*}; model=${nm#*:}
    step "round $round: $name"
    logged "$name-plain-$round" $model
    for spec in ${SPECS:-4}; do     # the host's draft windows, then chained ones
      [ "${HOST:-1}" = 0 ] || STRATA_DRAFT_GUARD=0 STRATA_CHAIN_DRAFTS=0 logged "$name-host$spec-$round" $model --spec $spec
      STRATA_DRAFT_GUARD=0 STRATA_CHAIN_DRAFTS=1 logged "$name-chained$spec-$round" $model --spec $spec
    done
  done
done
[ -z "${NO_GUARD:-}" ] || { summary; exit; }
export STRATA_DRAFT_GUARD_LOG=1 STRATA_CHAIN_DRAFTS=1
for nm in $MODELS; do
  name=${nm%%:*}; model=${nm#*:}
  step "guard (auto): $name"
  logged "$name-guard" $model --spec 4
done
summary
