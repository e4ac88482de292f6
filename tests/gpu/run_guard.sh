#!/usr/bin/env bash
# Issue 17: the draft guard on the default model with its trained MTP layer, now that drafts resumed after
# a pause first catch the drafter up on the paused positions (engine.drafts: the ring of hidden states):
# decode with no drafts and with --spec 4 under the guard (interleaved, two rounds), drafts every window,
# other prompt kinds; the ring's test on the GPU and a sampled batch-test with the guard forced on. Then
# with SAMPLE=1 issue 11's STRATA_SAMPLE_GRAPHS on and off (profile_host at T 0.8 on the smollm2-135m shape);
# EVERY=1 adds drafts every window for the prose and edit prompts.
# The default model travels in two halves (tests/gpu/prepare_default_model.sh here first):
#   bash tests/gpu/run_mtp_train.sh a     carry [".mdl/a"]
#   bash tests/gpu/run_guard.sh           carry [".mdl/b", ".mdl/b.sha256", ".wheels", ".whl/llama.gguf"]
# (the second at once: the machine keeps /tmp/mdl only while warm). Logs to $OUT/log.txt.
set -euo pipefail
mkdir -p .whl && cp .wheels/*.whl .whl/
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
D=/tmp/mdl; MD=$D/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -f $MD ]; then
  [ -f $D/a ] || { echo "FAIL: the first half is gone (the machine went cold): call run_mtp_train.sh a again"; exit 1; }
  cat $D/a .mdl/b > $MD
  [ "$(sha256sum $MD | cut -d' ' -f1)" = "$(cat .mdl/b.sha256)" ] || { rm $MD; echo "FAIL: halves do not join"; exit 1; }
fi
nvidia-smi --query-gpu=name --format=csv,noheader
check "the ring's test on the GPU" tail_of 3 timeout 200 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_draft_guard.py -k "resumed or guarded"
export STRATA_DRAFT_GUARD_LOG=1
G="timeout 150 $S bench --model $MD --devices cuda:0 --streams 1,4 --parallel 4 --max-tokens ${MAXTOK:-512} --ctx 2048"
for round in 1 2; do
  step "round $round"
  check "code, no drafts" $G --prompt-kind code
  check "code, spec 4, guard" $G --prompt-kind code --spec 4
done
check "code, spec 4, drafts every window" env STRATA_DRAFT_GUARD=0 $G --prompt-kind code --spec 4
for kind in prose edit; do
  check "$kind, no drafts" $G --prompt-kind $kind
  check "$kind, spec 4, guard" $G --prompt-kind $kind --spec 4
  [ -z "${EVERY:-}" ] || check "$kind, spec 4, every window" env STRATA_DRAFT_GUARD=0 $G --prompt-kind $kind --spec 4
done
check "batch-test spec 4 sampled, guard on" env STRATA_DRAFT_GUARD=1 $BT --model $MD --devices cuda:0 --parallel 4 \
  --spec 4 --temperature 0.8 --seed 3
check "batch-test solo spec 4 greedy, guard on" env STRATA_DRAFT_GUARD=1 $BT --model $MD --devices cuda:0 --parallel 1 \
  --spec 4
check "batch-test piped 3, two stages, sampled" $BT --model $MD --devices cuda:0,cuda:0 --parallel 4 --batch-groups 2 \
  --piped-mtp 3 --temperature 0.8 --seed 5
[ -n "${SAMPLE:-}" ] || { summary; exit; }
step "issue 11: sampler graphs"
$S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf >/dev/null
check "batch-test smol sampled 3 slots, graphs" env STRATA_SAMPLE_GRAPHS=1 $BT --model $M/smol.gguf --devices cuda:0 \
  --parallel 3 --temperature 0.8 --seed 2
for g in 1 0 1 0; do
  check "profile STRATA_SAMPLE_GRAPHS=$g, T 0.8" tail_of 14 env STRATA_SAMPLE_GRAPHS=$g TEMP=0.8 timeout 100 \
    python3 tests/gpu/profile_host.py $M/smol.gguf 60
done
summary
