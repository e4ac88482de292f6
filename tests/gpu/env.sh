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
glm_air() {   # the glm4moe GLM-4.5-Air-shape file in /dev/shm, made if absent (experts IQ4_XS, or QTYPE_MAP's map)
  GLM=/dev/shm/glm-air${QTYPE_MAP:+-map}.gguf
  [ -f $GLM ] || $S make-model --arch glm4moe --shape glm-4.5-air --qtype Q4_K \
    --qtype-map "${QTYPE_MAP:-*_exps.weight=IQ4_XS}" --out $GLM >/dev/null
}
exact_layouts() {   # batch-tests of the layouts that cross streams, stages and graphs (8B and SmolLM2 made first)
  local ngpu dev2 bt="timeout 150 $S batch-test --max-tokens 24"
  ngpu=$(python3 -c 'import torch; print(torch.cuda.device_count())')
  dev2=cuda:0,cuda:1; [ "$ngpu" -ge 2 ] || dev2=cuda:0,cuda:0
  $S make-model --arch llama --shape small --mtp 1 --weights counting --out $M/count.gguf >/dev/null
  $S make-model --arch qwen3moe --shape small --mtp 1 --qtype Q4_K --out $M/moe.gguf >/dev/null
  check "batch-test 8b $dev2 split 12, 2 groups, sampled" $bt --model $M/l8b.gguf --devices $dev2 --layer-split 12 \
    --parallel 4 --batch-groups 2 --temperature 0.8 --seed 7
  check "batch-test counting $dev2 piped 3" $bt --model $M/count.gguf --devices $dev2 --parallel 4 --batch-groups 2 \
    --piped-mtp 3
  check "batch-test moe spec 3 sampled" $bt --model $M/moe.gguf --devices cuda:0 --parallel 4 --draft mtp --spec 3 \
    --temperature 0.8 --seed 3
  check "batch-test smol sampled 3 slots" $bt --model $M/smol.gguf --devices cuda:0 --parallel 3 --temperature 0.8 \
    --seed 2
}
