#!/usr/bin/env bash
# Issue 15, session 16: IQ4 prompt tiles after the word repack (packed.iq4_words). Gathering x in the
# words' order made the 128-row IQ4_XS gate|up call 512 -> 1,346 us (prompt 13.2k -> 4.2k tok/s); the
# tiles now read the words whole and put their nibbles in GGUF's order (x read as before). bench_matmul's
# IQ4 checks and times, one batch-test, the bench (decode 1 and 8 streams, prompt 512). Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "matmul IQ4 checks + times" timeout 200 python3 tests/gpu/bench_matmul.py --iq4 --check-types IQ4_XS,IQ4_NL \
  --only llama-3-8b --matrices "gate|up,down"
$S make-model --arch llama --shape llama-3-8b --qtype IQ4_XS --out $M/l8b-iq4.gguf >/dev/null
check "batch-test 8b IQ4_XS sampled 4 slots" $BT --model $M/l8b-iq4.gguf --devices cuda:0 --parallel 4 \
  --temperature 0.8 --seed 5
check "bench 8b IQ4_XS 1,8" timeout 150 $S bench --model $M/l8b-iq4.gguf --streams 1,8 --parallel 8 $B
summary
