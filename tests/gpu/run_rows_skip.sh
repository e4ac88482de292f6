#!/usr/bin/env bash
# Issues 11/13/15/17, session 13: the int8 kernel skips a pass's rows past the real count (a 2-row window
# paid for 4 rows: 8B shape, 2 real rows of 16 took 4,141 us against 4,251 for 4); the decode tile at
# 1-4 and 8 real rows, exactness, the 8B shape with replayed drafts (acceptance 0.7, spec 4) against none,
# where SmolLM2's one-stream host time goes (all threads sampled), and IQ3_S decode after the launch
# changes of session 12. Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "dp4a kernel tests" timeout 200 python3 -m pytest -q -p no:cacheprovider -x tests/engine/test_dp4a_gemv.py
l8b_and_smol
check "decode tiles 8b at 1, 2, 3, 4, 8 rows" timeout 150 python3 tests/gpu/profile_stage.py $M/l8b.gguf 1 2 3 4 8
check "batch-test 8b greedy parallel 4" $BT --model $M/l8b.gguf --devices cuda:0 --parallel 4
check "batch-test 8b sampled parallel 3" $BT --model $M/l8b.gguf --devices cuda:0 --parallel 3 --temperature 0.8 --seed 5
check "bench 8b 1,2,4,8" timeout 150 $S bench --model $M/l8b.gguf --streams 1,2,4,8 --parallel 8 $B
$S make-model --arch llama --shape llama-3-8b --mtp 1 --qtype Q4_K --out $M/l8m.gguf >/dev/null
check "bench 8b mtp 1 stream, replay 0.7 spec 4" timeout 100 $S bench --model $M/l8m.gguf --streams 1 $B \
  --draft replay --replay-accept 0.7 --spec 4
check "bench 8b mtp 1 stream, replay 0.7 spec 3" timeout 100 $S bench --model $M/l8m.gguf --streams 1 $B \
  --draft replay --replay-accept 0.7 --spec 3
rm -f $M/l8m.gguf
check "smol one stream, threads sampled" timeout 120 python3 tests/gpu/sample_profile.py $M/smol.gguf cuda:0 1 6 1024
$S make-model --arch llama --shape llama-3-8b --qtype IQ3_S --out $M/l8b-iq3s.gguf >/dev/null
check "bench 8b IQ3_S 1,8" timeout 150 $S bench --model $M/l8b-iq3s.gguf --streams 1,8 --parallel 8 $B
summary
