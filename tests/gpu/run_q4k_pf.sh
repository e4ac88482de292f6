#!/usr/bin/env bash
# Issue 11, nineteenth session: the Q4_K tensor-core decode kernel pulling each warp's next super-blocks into
# L2 before the kernel before it has finished (STRATA_Q4K_PF=2, against 0), and prompt tiles dequantizing the
# tensor-core order from whole 16-row runs. Kernel and layout tests on the GPU, the 8B decode tile's kernels
# (1 and 8 rows), a sampled batch-test, the 8B bench at PF 2 / 0 and with dp4a. Logs to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
check "kernel and layout tests" tail_of 12 timeout 300 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_q4k_mma.py tests/engine/test_packed.py -k "q4k or tensor_core or dequantize_kernel or unpack"
l8b_and_smol
for pf in 2 0; do
  check "decode tile kernels 8b, PF $pf" env STRATA_Q4K_PF=$pf timeout 150 python3 tests/gpu/profile_stage.py \
    $M/l8b.gguf 1 8
done
check "batch-test 8b sampled 4 slots" $BT --model $M/l8b.gguf --devices cuda:0 --parallel 4 --temperature 0.8 --seed 4
for m in "STRATA_Q4K_PF=2" "STRATA_Q4K_PF=0" "STRATA_DECODE_KERNEL=dp4a" "STRATA_Q4K_PF=2"; do
  check "bench 8b 1,8 $m" env $m timeout 100 $S bench --model $M/l8b.gguf --streams 1,8 --parallel 8 $B
done
summary
