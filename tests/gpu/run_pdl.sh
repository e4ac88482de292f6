#!/usr/bin/env bash
# Issue 11, session 14: programmatic dependent launch (engine/kernels/pdl.py: each decode kernel starts while
# the one before finishes, weights prefetched to L2 before its wait; STRATA_PDL=0 turns it off) with the
# fused split attention and 1-row prefetch now default. The kernel tests under CUDA (the PDL test compares
# four blocks back to back, eager and graph-replayed, against launches one after another), batch-tests of
# the layouts that cross streams and graphs, then SmolLM2 and 8B benches with PDL off / on, and a decode
# tile profile with it on. Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "kernel tests under CUDA" timeout 300 python3 -m pytest -q -p no:cacheprovider -x tests/engine/test_gpu_kernels.py \
  tests/engine/test_attention_kernel.py tests/engine/test_dp4a_gemv.py tests/engine/test_moe_gemv.py
l8b_and_smol
exact_layouts
BT="timeout 150 $S batch-test --max-tokens 24"
check "batch-test 8b sampled 4 slots" $BT --model $M/l8b.gguf --devices cuda:0 --parallel 4 --temperature 0.8 --seed 4
for m in smol l8b; do
  for p in 0 1; do
    check "bench $m 1,8 pdl $p" env STRATA_PDL=$p timeout 120 $S bench --model $M/$m.gguf --streams 1,8 --parallel 8 $B
  done
done
check "bench smol 1,8 pdl 0 again (order)" env STRATA_PDL=0 timeout 120 $S bench --model $M/smol.gguf --streams 1,8 \
  --parallel 8 $B
check "decode tiles smol pdl" timeout 100 python3 tests/gpu/profile_stage.py $M/smol.gguf 1 8
check "decode tiles 8b pdl" timeout 100 python3 tests/gpu/profile_stage.py $M/l8b.gguf 1 8
summary
