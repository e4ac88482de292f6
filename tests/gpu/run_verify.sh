#!/usr/bin/env bash
# GPU: a short re-check of exactness and speed after engine changes. Logs to $OUT.
# Ends with one PASS/FAIL line; exits non-zero if any check failed.
set -euo pipefail
source "$(dirname "$0")/env.sh"
check "make count" $S make-model --arch llama --shape small --mtp 1 --weights counting --out $M/count.gguf
check "make smol" $S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf
for L in "--model $M/count.gguf --devices cuda:0,cuda:1 --parallel 4 --batch-groups 2 --piped-mtp 3 --temperature 0.8 --seed 7" \
         "--model $M/count.gguf --devices cuda:0 --parallel 3 --spec 4 --spec-min-p 0.5" \
         "--model $M/llama.gguf --devices cuda:0,cuda:1 --parallel 4 --batch-groups 2 --piped-mtp 2 --temperature 0.7 --seed 5"; do
  check "batch-test $L" without "^# note" timeout 120 $S batch-test --max-tokens 48 $L
done
check "bench smol" timeout 120 $S bench --model $M/smol.gguf --devices cuda:0 --streams 1,8 --max-tokens 128
check "bench count spec 4" timeout 120 $S bench --model $M/count.gguf --devices cuda:0 --streams 1,4 --max-tokens 128 --spec 4
summary
