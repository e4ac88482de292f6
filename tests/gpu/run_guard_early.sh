#!/usr/bin/env bash
# The draft guard's early end of a plain span far behind drafts (engine.draft_guard.EARLY): the counting
# smollm2-135m model (every draft kept) at --spec 4 with the guard (auto) against drafts every window
# (STRATA_DRAFT_GUARD=0), one stage (chained windows) and two stages of one GPU in one group, 1 and 4 streams
# of 128 tokens: the guard's first trial is most of such a short bench.
#   bash tests/gpu/run_guard_early.sh     carry [".wheels", ".whl/llama.gguf"]
set -euo pipefail
mkdir -p .whl && cp .wheels/*.whl .whl/
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
$S make-model --arch llama --shape smollm2-135m --mtp 1 --qtype Q4_1 --weights counting --out $M/count.gguf >/dev/null
for devs in cuda:0 cuda:0,cuda:0; do
  for guard in auto 0; do
    step "$devs, guard $guard"
    check "$devs guard $guard" env STRATA_DRAFT_GUARD=$guard timeout 150 $S bench --model $M/count.gguf --devices $devs \
      --parallel 4 --batch-groups 1 --spec 4 --streams 1,4 --max-tokens 128 --prompt-tokens 64 --ctx 1024
  done
done
summary
