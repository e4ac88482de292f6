#!/usr/bin/env bash
# Issue 11: engine.kernels.sample as one graph replay per shape (SampleGraph) instead of three launches.
# The sampler's tests and the chaining tests on the GPU, a sampled batch-test, and profile_host.py's host
# parts at T 0.8 on the smollm2-135m shape, graphs on and off (STRATA_SAMPLE_GRAPHS). Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "sampler and chaining tests" tail_of 4 timeout 200 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_sample_kernel.py tests/engine/test_chaining.py -k "graph or sampled or host"
$S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf >/dev/null
check "batch-test smol sampled 3 slots" $BT --model $M/smol.gguf --devices cuda:0 --parallel 3 --temperature 0.8 --seed 2
for g in 1 0; do
  step "STRATA_SAMPLE_GRAPHS=$g, T 0.8"
  check "profile $g" tail_of 22 env STRATA_SAMPLE_GRAPHS=$g TEMP=0.8 timeout 100 python3 tests/gpu/profile_host.py \
    $M/smol.gguf 60
done
summary
