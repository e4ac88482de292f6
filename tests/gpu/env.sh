# Sourced by the GPU scripts (run there from the repo root; tests/gpu/prepare.sh fills .whl/ here first):
# carried wheels, environment, the tiny
# synthetic models from .whl/ and the tokenizer source for make-model (the default model can't travel).
# The scripts run under `set -euo pipefail`; each check runs through `check "name" cmd...`, which records a
# failure and goes on, so the log shows every step; `summary` prints one PASS/FAIL line and sets the exit
# status. A set-up command that fails outside `check` ends the script with a FAIL line too.
CHECKS=0; FAILED=(); SUMMARY_DONE=0
step() { echo; echo "=== $*"; }
check() {   # check "name" cmd args...: run one check, record it if it fails, keep going
  local name=$1 rc=0; shift
  CHECKS=$((CHECKS + 1))
  echo "--- $name"
  "$@" || rc=$?
  if [ "$rc" -ne 0 ]; then echo "--- FAILED (exit $rc): $name"; FAILED+=("$name"); fi
}
tail_of() { local n=$1; shift; "$@" 2>&1 | tail -n "$n"; }            # status: the command's (pipefail)
without() { local pat=$1; shift; "$@" | { grep -v -- "$pat" || true; }; }  # drop lines matching pat
summary() {
  SUMMARY_DONE=1
  if [ ${#FAILED[@]} -eq 0 ]; then echo; echo "PASS: $CHECKS checks"; return 0; fi
  local list; list=$(printf '%s; ' "${FAILED[@]}")
  echo; echo "FAIL: ${#FAILED[@]} of $CHECKS checks failed: ${list%; }"
  exit 1
}
trap 'rc=$?; if [ "$SUMMARY_DONE" = 0 ]; then echo; echo "FAIL: stopped with exit $rc after $CHECKS checks (${#FAILED[@]} failed)"; [ "$rc" -ne 0 ] || exit 1; fi' EXIT

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
OUT=${OUT:-./gpu-out}; mkdir -p "$OUT"
S="python3 -m app.cli"; M=/tmp/models; mkdir -p $M
cp .whl/*.gguf $M/ && export STRATA_TOKENIZER_FROM=$M/llama.gguf
# a script's batch-test and the README table's bench flags (scripts may set their own after sourcing this)
BT="timeout 120 $S batch-test --max-tokens 32"
B="--prompt-tokens 512 --max-tokens 128 --ctx 2048 --devices cuda:0"
l8b_and_smol() {   # the two shapes most scripts bench: $M/l8b.gguf (llama-3-8b Q4_K), $M/smol.gguf (smollm2-135m Q4_1)
  $S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
  $S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf >/dev/null
}
