#!/usr/bin/env bash
# Issue 14 (long-context decode) and 11 (the Q4_K kernel at 16 rows). The tensor-core split attention with its
# G heads merged side by side (_merge_heads; the first run, run_attn_tc.sh, merged them one after another and
# lost 1-7 us a layer at short contexts): its GPU tests, the kernels alone over chunkings and key blocks, the 8B
# at 6,000 positions and at short contexts with it on (off measured in run_attn_tc.sh the same day). Then Nsight
# Compute on the Q4_K tensor-core kernel at a full 16-row tile and at 8 real rows of 16 (gate 14336x4096).
set -euo pipefail
source "$(dirname "$0")/env.sh"
check "attention tests" timeout 150 python3 -m pytest -q -p no:cacheprovider tests/engine/test_attention_kernel.py \
  -k "split or fused"
check "attention alone" timeout 200 python3 tests/gpu/bench_attention.py
l8b_and_smol
export STRATA_ATTN_TC=1
check "8b at 6000 positions (tc 1)" timeout 120 $S bench --model $M/l8b.gguf --devices cuda:0 --max-tokens 64 \
  --parallel 4 --streams 1,4 --prompt-tokens 6000 --ctx 8192
check "8b decode 1,8 (tc 1)" timeout 120 $S bench --model $M/l8b.gguf $B --streams 1,8 --parallel 8
unset STRATA_ATTN_TC
NCU="ncu --clock-control none -k regex:q4k --launch-skip 4 --launch-count 1 --section SpeedOfLight \
  --section WarpStateStats --section MemoryWorkloadAnalysis --section InstructionStats --section Occupancy \
  --section SchedulerStats --section LaunchStats --section ComputeWorkloadAnalysis"
for job in 14336x4096:16:16 14336x4096:16:8; do
  IFS=: read -r shape rows nreal <<< "$job"
  check "ncu q4k_mma $shape $nreal of $rows rows" timeout 100 $NCU \
    env SHAPE=$shape KERNEL=q4k ROWS=$rows NREAL=$nreal python3 tests/gpu/ncu_imma.py
done
summary
