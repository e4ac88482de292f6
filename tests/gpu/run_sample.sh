#!/usr/bin/env bash
# Issue 11 item 3, sampled picks on the device (engine.kernels.sample, first GPU run; sampled windows now
# chain on them): its tests and the chaining tests; the exact
# layouts (their sampled batch-tests now pick there, drafts included); strata bench on the SmolLM2 and 8B
# shapes greedy, at temperature 0.8 and at 0.8 with top-p 0.95, with the host's picks (STRATA_DEVICE_SAMPLING=0)
# beside; the kernel's time a row. Before it (run_merge_fold.sh, 2026-12-04): smol 1 / 32 streams greedy
# 1,312 / 7,375 tok/s, 0.8 353 / 530, 0.8 + top-p 0.95 272 / 453. Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "sampling tests" tail_of 4 timeout 300 python3 -m pytest -q -p no:cacheprovider -x \
  tests/engine/test_sample_kernel.py tests/engine/test_sampling.py tests/engine/test_chaining.py
check "sampler time a row" timeout 120 python3 tests/gpu/bench_sample.py
l8b_and_smol
exact_layouts
check "batch-test smol top-p 8 slots" $BT --model $M/smol.gguf --devices cuda:0 --parallel 8 --temperature 0.9 --seed 4
for dev in ${DEVS_SAMPLING-1 0}; do
  for t in "--temperature 0" "--temperature 0.8" "--temperature 0.8 --top-p 0.95"; do
    check "bench smol device=$dev $t" env STRATA_DEVICE_SAMPLING=$([ $dev = 1 ] && echo auto || echo 0) timeout 120 \
      $S bench --model $M/smol.gguf --streams 1,32 --parallel 32 --prompt-tokens 64 --max-tokens 128 --ctx 1024 \
      --devices cuda:0 $t
  done
done
check "bench 8b 0.8 top-p 0.95" timeout 120 $S bench --model $M/l8b.gguf --streams 1,8 --parallel 8 $B --temperature 0.8 \
  --top-p 0.95
summary
