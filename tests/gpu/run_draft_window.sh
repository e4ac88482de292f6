#!/usr/bin/env bash
# Issue 17: where a chained draft window's GPU time goes (tests/gpu/profile_draft_window.py): each graph
# replayed alone, then one stream's steps with a trace (busy / idle per step, kernels by launch kind), on
# the smollm2-135m shape with a counting MTP model (every draft kept) and a random MTP layer (every draft
# rejected), at --spec 1 (plain chained windows), 2 and 4.
#   bash tests/gpu/run_draft_window.sh     carry [".wheels", ".whl/llama.gguf"]
# MODELS ("count random"), SPECS ("1 2 4") and AB (a list of NAME=VALUE environment settings, each profiled
# beside the default) size it; TESTS=1 runs the chained draft tests here first.
set -euo pipefail
mkdir -p .whl && cp .wheels/*.whl .whl/
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
[ -z "${TESTS:-}" ] || check "chained draft tests on the GPU" tail_of 30 timeout 300 python3 -m pytest -q \
  -p no:cacheprovider -x tests/engine/test_draft_chain.py tests/engine/test_draft_graph.py tests/engine/test_chaining.py
$S make-model --arch llama --shape smollm2-135m --mtp 1 --qtype Q4_1 --out $M/random.gguf >/dev/null
$S make-model --arch llama --shape smollm2-135m --mtp 1 --qtype Q4_1 --weights counting --out $M/count.gguf >/dev/null
for m in ${MODELS:-count random}; do
  for spec in ${SPECS:-1 2 4}; do
    for ab in default ${AB:-}; do
      step "$m --spec $spec ($ab)"
      envs=(); [ "$ab" = default ] || envs=("$ab")
      check "$m spec $spec $ab" env "${envs[@]}" SPEC=$spec timeout 150 python3 tests/gpu/profile_draft_window.py $M/$m.gguf 100
    done
  done
done
summary
