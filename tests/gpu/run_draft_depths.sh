#!/usr/bin/env bash
# Issue 17: what a draft window costs by depth on the default model's shape, drafts chained on the device
# (engine.draft_chain), against plain chained windows: the GPU kernels per window (profile_host.py) and
# one stream's tok/s at --spec 1..4, on a random MTP layer (every draft rejected) and the counting model
# (every draft kept); first the GPU test that failed after test_draft_chain.py (alone, then in that order).
#   bash tests/gpu/run_draft_depths.sh     carry [".wheels", ".whl/llama.gguf"]
set -euo pipefail
mkdir -p .whl && cp .wheels/*.whl .whl/
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
T=tests/engine/test_chaining.py::test_sampled_windows_chain_on_the_samplers_device_picks
check "sampled chaining test alone" tail_of 25 timeout 120 python3 -m pytest -q -p no:cacheprovider -x $T
check "after test_draft_chain" tail_of 25 timeout 200 python3 -m pytest -q -p no:cacheprovider -x \
  tests/engine/test_draft_chain.py $T
$S make-model --arch llama --shape smollm2-135m --mtp 1 --qtype Q4_1 --out $M/smol-mtp.gguf >/dev/null
$S make-model --arch llama --shape smollm2-135m --mtp 1 --qtype Q4_1 --weights counting --out $M/smol-count.gguf >/dev/null
export STRATA_CHAIN_DRAFTS=1 STRATA_DRAFT_GUARD=0
for spec in 1 2 3 4; do
  step "GPU kernels per window, spec $spec (random MTP layer)"
  check "profile spec $spec" env SPEC=$spec timeout 120 python3 tests/gpu/profile_host.py $M/smol-mtp.gguf 100
done
G="timeout 120 $S bench --devices cuda:0 --streams 1 --max-tokens 512 --ctx 2048 --prompt-kind code"
for spec in 2 3; do
  for m in smol-mtp smol-count; do
    check "bench $m spec $spec" $G --model $M/$m.gguf --spec $spec
  done
done
summary
