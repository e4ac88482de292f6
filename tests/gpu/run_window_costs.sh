#!/usr/bin/env bash
# Issues 13 / 17 / 11: `strata bench --window-costs` (a decode window by its rows and part: layers, + picks,
# + the drafter) on the llama-3-8b shape and the smollm2-135m counting model; --batch-groups auto's measured
# choice (engine.group_choice) on two stages of one GPU beside groups 1 and 2; the chained draft tests and
# batch-tests after the device verdict was written once (engine.window.kept_on_device); the Q4_K kernel's
# launch settings at one row (on an H100 the int8 kernel beat it at one row on qkv, wo and gate|up).
#   bash tests/gpu/run_window_costs.sh     carry [".wheels", ".whl/llama.gguf"]
set -euo pipefail
mkdir -p .whl && cp .wheels/*.whl .whl/
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
check "chained draft tests on the GPU" tail_of 30 timeout 300 python3 -m pytest -q -p no:cacheprovider -x \
  tests/engine/test_draft_chain.py tests/engine/test_draft_graph.py tests/engine/test_chaining.py
$S make-model --arch llama --shape smollm2-135m --mtp 1 --qtype Q4_1 --weights counting --out $M/count.gguf >/dev/null
check "batch-test counting spec 4, 3 slots (chained draft windows)" $BT --model $M/count.gguf --devices cuda:0 \
  --parallel 3 --draft mtp --spec 4
step "counting smollm2 --spec 4, drafts every window"
check "counting spec 4" env STRATA_DRAFT_GUARD=0 timeout 150 $S bench --model $M/count.gguf --devices cuda:0 \
  --spec 4 --draft mtp --streams 1,4 --parallel 4 --max-tokens 128 --prompt-tokens 64 --ctx 1024 \
  --window-costs 1,2,4,8,16
step "--batch-groups auto on two stages of one GPU (engine.group_choice), beside groups 1 and 2"
for g in auto 1 2; do
  check "counting, 2 stages, groups $g" timeout 200 $S bench --model $M/count.gguf --devices cuda:0,cuda:0 \
    --parallel 4 --batch-groups $g --spec 4 --piped-mtp 3 --streams 4 --max-tokens 128 --prompt-tokens 64 --ctx 1024
done
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
step "8B bench and window costs"
check "8B bench" timeout 240 $S bench --model $M/l8b.gguf $B --streams 1,8 --parallel 8 --window-costs 1,2,4,8,16
step "Q4_K at one row: warps x groups (the warps change the sums' order; the groups and AHEAD do not), AHEAD 1 / 2"
for a in 1 2; do
  check "q4k sweep, AHEAD $a" env STRATA_Q4K_AHEAD=$a timeout 120 python3 tests/gpu/bench_q4k_mma.py --sweep --rows 1 \
    --shapes "qkv,wo,gate|up,down"
done
summary
