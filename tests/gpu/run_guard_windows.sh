#!/usr/bin/env bash
# Issue 17: where a lone request's wall time goes with the draft guard on, window by window
# (engine.window_log; summed by tests/gpu/window_log.py): the default model with its trained MTP layer,
# code and edit prompts, one stream, no drafts against --spec 4 under the guard, twice each, interleaved.
# After run_mtp_train.sh a (carry [".mdl/a"]), at once:
#   bash tests/gpu/run_guard_windows.sh   carry [".mdl/b", ".mdl/b.sha256", ".wheels", ".whl/llama.gguf"]
# or in one call on a synthetic model of the default model's shape with a random MTP layer (its drafts are
# rejected, so the guard pauses them: what paused windows cost beside plain ones):
#   SYNTH=1 bash tests/gpu/run_guard_windows.sh   carry [".wheels", ".whl/llama.gguf"]
# STREAMS (default 1): streams (and slots) a bench runs. NORING=1: a third bench per kind and round, guarded
# without the drafter's ring of paused positions (STRATA_DRAFT_RING=0: what keeping it costs a paused window).
# EVERY (default code:4): kind:spec pairs run with drafts every window (STRATA_DRAFT_GUARD=0) at the end.
# ROUNDS (default 2) interleaved rounds; KINDS the prompt kinds (default code and edit; code alone where
# ROUNDS > 2, to keep a call inside its limit). Beside each bench a poller (tests/gpu/thread_cpus.py) prints
# which CPUs its threads ran on ("threads: name@cpu{cpu:samples}=seconds", the busiest first).
# PIN=2-3: every bench under `taskset -c $PIN`; with PIN_AB=1 each round runs plain and guard without the pin,
# then plain and guard with it (logs named *-pin-*). BUDGET_S: start no bench that the longest one so far
# would carry past BUDGET_S seconds of the script (it says which it skipped).
# Logs to $OUT/log.txt, the window logs to $OUT/windows.tgz (w-*.jsonl).
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
{ echo "cpus: $(nproc) online $(cat /sys/devices/system/cpu/online 2>/dev/null)"
  lscpu 2>/dev/null | grep -i "^model name\|^socket\|^numa node\|mhz" || true
  nvidia-smi topo -m 2>/dev/null | head -n 3 || true; } || true
export STRATA_DRAFT_GUARD_LOG=1
G="timeout 120 $S bench --model $MD --devices cuda:0 --streams ${STREAMS:-1} --parallel ${STREAMS:-1} --max-tokens ${MAXTOK:-512} --ctx 2048"
WL=/tmp/wlog; rm -rf $WL; mkdir -p $WL
placed() {   # placed NAME cmd...: cmd in the background, its threads' CPUs polled beside it; cmd's status
  local name=$1 rc=0 pid poll; shift
  "$@" & pid=$!
  { python3 tests/gpu/thread_cpus.py $pid > "/tmp/threads-$name.txt" 2>&1 || true; } & poll=$!
  wait $pid || rc=$?
  wait $poll 2>/dev/null || true
  cat "/tmp/threads-$name.txt" 2>/dev/null || echo "threads: (no poller output)"
  return $rc
}
LONGEST=0
logged() {   # logged NAME PIN|- bench-args...: a bench with its window log (pinned to PIN's CPUs), the log summed
  local name=$1 pin=$2 t0=$SECONDS; shift 2
  if [ -n "${BUDGET_S:-}" ] && [ $((SECONDS + LONGEST)) -gt "$BUDGET_S" ]; then
    echo "--- skipped $name: ${SECONDS} s gone, the longest bench took ${LONGEST} s, BUDGET_S=$BUDGET_S"; return 0
  fi
  local P=(); [ "$pin" = - ] || P=(taskset -c "$pin")
  rm -f "$WL/w-$name.jsonl"
  check "$name" placed "$name" env STRATA_WINDOW_LOG="$WL/w-$name.jsonl" "${P[@]}" $G "$@"
  python3 tests/gpu/window_log.py "$WL/w-$name.jsonl" | tail -n 12 || echo "(no window log)"
  local took=$((SECONDS - t0)); echo "--- $name took $took s"
  [ $took -le $LONGEST ] || LONGEST=$took
}
ROUNDS=${ROUNDS:-2}
if [ -n "${SYNTH:-}" ]; then KINDS=${KINDS_SYNTH:-code}        # (random drafts: one kind says it)
elif [ "$ROUNDS" -gt 2 ]; then KINDS=${KINDS:-code}
else KINDS=${KINDS:-code edit}; fi
PINS=("${PIN:--}"); [ -z "${PIN:-}" ] || [ "${PIN_AB:-}" != 1 ] || PINS=(- "$PIN")
echo "rounds $ROUNDS, kinds $KINDS, pins ${PINS[*]} (-: none)"
for round in $(seq 1 "$ROUNDS"); do
  step "round $round"
  for pin in "${PINS[@]}"; do
    tag=; [ "$pin" = - ] || tag=-pin
    for kind in $KINDS; do
      logged "$kind-plain$tag-$round" "$pin" --prompt-kind $kind
      logged "$kind-guard$tag-$round" "$pin" --prompt-kind $kind --spec 4
      [ -z "${NORING:-}" ] || STRATA_DRAFT_RING=0 logged "$kind-noring$tag-$round" "$pin" --prompt-kind $kind --spec 4
    done
  done
done
export STRATA_DRAFT_GUARD=0
for ks in ${EVERY:-code:4}; do      # drafts every window at a fixed --spec, per kind:spec
  logged "${ks%%:*}-every-${ks##*:}" "${PINS[0]}" --prompt-kind "${ks%%:*}" --spec "${ks##*:}"
done
tar czf "$OUT/windows.tgz" -C $WL . || true
summary
