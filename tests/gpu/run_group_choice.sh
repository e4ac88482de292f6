#!/usr/bin/env bash
# Issue 13 item 5: --batch-groups auto's choice (engine.group_choice: the scheduler decodes a filler prompt in
# each layout at load) against the layouts' own benches, drafts every window (STRATA_DRAFT_GUARD=0), on two
# stages of one GPU (two GPUs where there are two): the smollm2-135m shape with a counting MTP layer (every
# draft kept) and with a random one (none kept). Also --window-costs on the counting model (one stage).
#   bash tests/gpu/run_group_choice.sh     carry [".wheels", ".whl/llama.gguf"]
set -euo pipefail
mkdir -p .whl && cp .wheels/*.whl .whl/
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
ngpu=$(python3 -c 'import torch; print(torch.cuda.device_count())')
dev2=cuda:0,cuda:1; [ "$ngpu" -ge 2 ] || dev2=cuda:0,cuda:0
$S make-model --arch llama --shape smollm2-135m --mtp 1 --qtype Q4_1 --weights counting --out $M/count.gguf >/dev/null
$S make-model --arch llama --shape smollm2-135m --mtp 1 --qtype Q4_1 --out $M/random.gguf >/dev/null
export STRATA_DRAFT_GUARD=0
for m in count random; do
  for g in auto 1 2; do
    step "$m, $dev2, groups $g"
    check "$m groups $g" timeout 150 $S bench --model $M/$m.gguf --devices $dev2 --parallel 4 --batch-groups $g \
      --spec 4 --piped-mtp 3 --streams 4 --max-tokens 256 --prompt-tokens 64 --ctx 1024
  done
done
step "window costs, counting model, one stage"
check "window costs" timeout 150 $S bench --model $M/count.gguf --devices cuda:0 --spec 4 --draft mtp --streams 1 \
  --max-tokens 64 --prompt-tokens 64 --ctx 1024 --window-costs 1,2,4,8,16
summary
