#!/usr/bin/env bash
# Session 15 (issue 11): a first stage's tile graphs embed the window's token ids themselves (a chained
# window's device picks put over them inside the replay's inputs; STRATA_GRAPH_EMBED=0 the old eager
# gather + copy), for SmolLM2's host-bound one stream. The same bits by construction: batch-tests of
# lone against batched requests (chained greedy, sampled, two stages with the hidden rows handed over,
# piped MTP), then benches A/B in one call. Its first run (session 15) also tried eight x rows per pass
# for tiles of 8+ rows only (no better: eight 8B streams 1,319 against 1,342; dropped). Logs to
# $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "kernel + graph input tests" timeout 200 python3 -m pytest -q -p no:cacheprovider -x \
  tests/engine/test_graph_inputs.py
l8b_and_smol
check "batch-test smol greedy 3 slots (chained)" $BT --model $M/smol.gguf --devices cuda:0 --parallel 3
check "batch-test 8b greedy 8 slots" $BT --model $M/l8b.gguf --devices cuda:0 --parallel 8
exact_layouts
for i in 1 2; do
  for g in 0 1; do
    check "bench smol 1,8 graph-embed $g #$i" env STRATA_GRAPH_EMBED=$g timeout 120 $S bench --model $M/smol.gguf \
      --streams 1,8 --parallel 8 $B
  done
done
check "bench 8b 1,8" timeout 150 $S bench --model $M/l8b.gguf --streams 1,8 --parallel 8 $B
summary
