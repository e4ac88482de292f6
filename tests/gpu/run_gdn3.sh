#!/usr/bin/env bash
# Issue 16: the delta net's three launches (row-parallel conv, scan over value heads and 32-column blocks,
# row-parallel finish; written 2026-12-02, never run on a GPU) on one H200: their tests under CUDA, the
# hybrids' batch-tests (one stage spec 3; two stages on the one GPU, piped MTP 2, sampled), the qwen3.5-9b
# and qwen3.5-35b-a3b shapes' speed (1 and 4 streams, 512-token prompts) and where a 35B prompt tile's time
# goes now (it was 235 ms, 156 of them in the old one-program-per-head row walk).
set -euo pipefail
source "$(dirname "$0")/env.sh"
check "delta net kernel tests" timeout 150 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_gdn_rows.py tests/engine/test_hybrid.py
for a in qwen35moe qwen3next qwen35; do
  $S make-model --arch $a --shape small --mtp 1 --qtype Q4_K --out $M/$a.gguf >/dev/null
  check "batch-test $a spec 3" timeout 100 $S batch-test --model $M/$a.gguf --devices cuda:0 --parallel 4 \
    --max-tokens 16 --draft mtp --spec 3
  check "batch-test $a 2 stages piped 2 sampled" timeout 100 $S batch-test --model $M/$a.gguf \
    --devices cuda:0,cuda:0 --parallel 4 --batch-groups 2 --piped-mtp 2 --max-tokens 16 --temperature 0.8 --seed 5
done
$S make-model --arch qwen35 --shape qwen3.5-9b --mtp 1 --qtype Q4_K --out $M/q35-9b.gguf >/dev/null
check "bench qwen3.5-9b shape" timeout 120 $S bench --model $M/q35-9b.gguf --devices cuda:0 --max-tokens 64 \
  --ctx 2048 --prompt-tokens 512 --streams 1,4 --parallel 4
rm -f $M/q35-9b.gguf
$S make-model --arch qwen35moe --shape qwen3.5-35b-a3b --mtp 1 --qtype Q4_K --out $M/q35-35b.gguf >/dev/null
check "bench qwen3.5-35b-a3b shape" timeout 150 $S bench --model $M/q35-35b.gguf --devices cuda:0 --max-tokens 64 \
  --ctx 2048 --prompt-tokens 512 --streams 1,4 --parallel 4
check "profile qwen3.5-35b-a3b prompt tile" timeout 120 python3 tests/gpu/profile_stage.py $M/q35-35b.gguf prompt
summary
