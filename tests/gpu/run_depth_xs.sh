#!/usr/bin/env bash
# Issue 11/12, written in session 12 for the next: two chained windows beyond the oldest in flight
# (STRATA_CHAIN_DEPTH=2: SmolLM2's one stream was held by the host, 1.3 ms a window against a 0.93 ms
# replay) and the MoE pair kernel with two weight rows per x load (STRATA_MOE_XS=2): exactness, then the
# benches at each setting (the 8B / SmolLM2 / qwen3-30b-a3b shapes, 512-token prompt, 128 tokens).
# The 8B shape with an MTP layer, one stream with replayed drafts (acceptance 0.7) against none.
# Logs to $OUT/log.txt. NO_CHAIN=1 / NO_DRAFTS=1 / NO_MOE=1 leave those parts out; all of it passes one
# call's 10 minutes: run `NO_MOE=1 bash tests/gpu/run_depth_xs.sh`, then `NO_CHAIN=1 NO_DRAFTS=1 bash ...`.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "chaining + moe kernel tests" timeout 200 python3 -m pytest -q -p no:cacheprovider -x tests/engine/test_chaining.py \
  tests/engine/test_moe_gemv.py
l8b_and_smol
if [ -z "${NO_CHAIN:-}" ]; then
check "batch-test 8b greedy parallel 4, depth 2" env STRATA_CHAIN_DEPTH=2 $BT --model $M/l8b.gguf --devices cuda:0 --parallel 4
check "batch-test smol greedy 3 slots in 3 groups, depth 2" env STRATA_CHAIN_DEPTH=2 $BT --model $M/smol.gguf \
  --devices cuda:0 --parallel 3 --batch-groups 3
for depth in 1 2; do
  check "bench smol 1,8 depth $depth" env STRATA_CHAIN_DEPTH=$depth timeout 80 $S bench --model $M/smol.gguf --streams 1,8 --parallel 8 $B
  check "bench 8b 1 depth $depth" env STRATA_CHAIN_DEPTH=$depth timeout 100 $S bench --model $M/l8b.gguf --streams 1 --parallel 8 $B
done
fi
if [ -z "${NO_DRAFTS:-}" ]; then     # drafts' index rows now reach the device without host waits too
  $S make-model --arch llama --shape llama-3-8b --mtp 1 --qtype Q4_K --out $M/l8b-mtp.gguf >/dev/null
  check "batch-test 8b mtp spec 4" $BT --model $M/l8b-mtp.gguf --devices cuda:0 --parallel 3 --draft mtp --spec 4
  check "bench 8b mtp 1 stream, no drafts" timeout 100 $S bench --model $M/l8b-mtp.gguf --streams 1 $B
  check "bench 8b mtp 1 stream, replay 0.7 spec 4" timeout 100 $S bench --model $M/l8b-mtp.gguf --streams 1 $B \
    --draft replay --replay-accept 0.7 --spec 4
fi
if [ -z "${NO_MOE:-}" ]; then
  $S make-model --arch qwen3moe --shape small --mtp 1 --qtype Q4_K --out $M/moe.gguf >/dev/null
  $S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype Q4_K --out $M/q30.gguf >/dev/null
  check "batch-test moe sampled spec 3, moe xs 2" env STRATA_MOE_XS=2 $BT --model $M/moe.gguf --devices cuda:0 \
    --parallel 4 --draft mtp --spec 3 --temperature 0.8 --seed 3
  check "moe kernels alone (xs sweep)" timeout 150 python3 tests/gpu/bench_moe.py $M/q30.gguf
  for xs in 1 2; do
    check "bench q30 1,8 moe xs $xs" env STRATA_MOE_XS=$xs timeout 150 $S bench --model $M/q30.gguf --streams 1,8 --parallel 8 $B
  done
fi
summary
