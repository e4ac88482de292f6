#!/usr/bin/env bash
# Issues 11/17, session 13: eight x rows per pass in the int8 kernel (STRATA_DP4A_RB=8: each weight unit
# loaded once for 8 rows; 128 registers against 122 at 4, sm_90 SASS here) against 4, and the host trims of
# a window (hidden rows and chained tokens as slices, graph-made logits as views, the chain's picks reused
# by the verdicts). Kernel sweep, decode tiles at 1-16 rows, benches at 1-8 streams, exactness, SmolLM2's
# one stream (host-bound), the 8B shape with replayed drafts. Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "dp4a kernel tests" timeout 200 python3 -m pytest -q -p no:cacheprovider -x tests/engine/test_dp4a_gemv.py
l8b_and_smol
check "kernel sweep rb" timeout 200 python3 tests/gpu/bench_matmul.py --sweep-rb --no-checks --only llama-3-8b \
  --matrices "gate|up,down,qkv"
for rb in 4 8; do
  check "decode tiles 8b rb $rb" env STRATA_DP4A_RB=$rb timeout 150 python3 tests/gpu/profile_stage.py $M/l8b.gguf 2 4 8 16
  check "bench 8b 1,2,4,8 rb $rb" env STRATA_DP4A_RB=$rb timeout 150 $S bench --model $M/l8b.gguf --streams 1,2,4,8 --parallel 8 $B
done
check "batch-test 8b greedy 8 slots rb 8" env STRATA_DP4A_RB=8 $BT --model $M/l8b.gguf --devices cuda:0 --parallel 8
check "batch-test 8b sampled 6 slots rb 8" env STRATA_DP4A_RB=8 $BT --model $M/l8b.gguf --devices cuda:0 --parallel 6 \
  --temperature 0.8 --seed 5
check "batch-test smol greedy 3 slots" $BT --model $M/smol.gguf --devices cuda:0 --parallel 3
check "bench smol 1,8" timeout 80 $S bench --model $M/smol.gguf --streams 1,8 --parallel 8 $B
check "host profile smol" timeout 100 python3 tests/gpu/profile_host.py $M/smol.gguf 200
$S make-model --arch llama --shape llama-3-8b --mtp 1 --qtype Q4_K --out $M/l8m.gguf >/dev/null
check "bench 8b mtp 1 stream, replay 0.7 spec 4" timeout 100 $S bench --model $M/l8m.gguf --streams 1 $B \
  --draft replay --replay-accept 0.7 --spec 4
summary
