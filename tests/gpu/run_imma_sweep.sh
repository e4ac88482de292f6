#!/usr/bin/env bash
# Issue 11 scratch: the imma kernel sweep on the 8B shapes and where a SmolLM2 decode step goes.
set -euo pipefail
source "$(dirname "$0")/env.sh"
check "imma v2 sweep" timeout 300 python3 tests/gpu/bench_matmul.py --sweep-imma --only llama-3-8b 2>&1 | grep -v "^check" | cut -c1-2000
$S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf >/dev/null
check "tile profile smol" timeout 100 python3 tests/gpu/profile_stage.py $M/smol.gguf 1 2>&1 | tail -25
check "host gap smol" timeout 100 python3 tests/gpu/profile_host.py $M/smol.gguf 100 2>&1 | tail -20
summary
