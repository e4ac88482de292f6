#!/usr/bin/env bash
# Issue 11: the row kernels' launch shapes on a decode tile with one real row (profile_stage.py, llama-3-8b
# Q4_K and smollm2-135m Q4_1): for each "ATTN_BN:ATTN_WARPS:NORM_WARPS" in $CONFIGS the tile's replay
# time and the attention and residual kernels' time; then decode benches (1 stream) for each of $BENCH.
set -euo pipefail
source "$(dirname "$0")/env.sh"
$S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf >/dev/null
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
run_with() {   # run_with "BN:W:RW" cmd...
  local c=$1; shift
  STRATA_ATTN_BN=$(echo $c | cut -d: -f1) STRATA_ATTN_WARPS=$(echo $c | cut -d: -f2) \
    STRATA_NORM_WARPS=$(echo $c | cut -d: -f3) "$@"
}
tile() { run_with "$1" timeout 120 python3 tests/gpu/profile_stage.py "$2" 1 2>&1 | grep -E "real rows|_attn|_residual|_dp4a"; }
for c in ${CONFIGS:-64:4:0 128:4:8 128:8:16 256:8:4 32:2:0}; do
  step "$c"
  check "tile 8b ($c)" tile "$c" $M/l8b.gguf
  check "tile smol ($c)" tile "$c" $M/smol.gguf
done
for c in ${BENCH:-64:4:0 128:8:8}; do
  step "bench $c"
  check "bench 8b ($c)" run_with "$c" timeout 150 $S bench --model $M/l8b.gguf --devices cuda:0 --streams 1 --max-tokens 64 --ctx 1024
  check "bench smol ($c)" run_with "$c" timeout 120 $S bench --model $M/smol.gguf --devices cuda:0 --streams 1 --max-tokens 128 --ctx 1024
done
summary
