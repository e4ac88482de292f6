#!/usr/bin/env bash
# Issues 11 / 17: a mid decode tile (STRATA_MID_TILE=8, TileSizes.mid) for windows of 2-8 rows (a few streams,
# a slot's draft window). Compiled for sm_90 (2026-12-06, /tmp script over GluonASTSource), the Q4_K
# tensor-core kernel holds 255 registers in a 16-row tile (TWO: both passes in one sweep; 8 warps an SM) but
# 168 in a tile of at most 8 rows (one pass; 12 warps), and a 16-row tile with 2-8 real rows runs the former.
#   bash tests/gpu/run_mid_tile.sh     carry [".wheels", ".whl/llama.gguf"]
# PART=k: the kernel by tile and real rows, and where an 8B tile's time goes at 8 and 16 rows;
# PART=e: end to end with and without the mid tile (8B streams, SmolLM2's draft windows), and batch-tests with it;
# --batch-groups auto's measured choice on two stages of one GPU.
set -euo pipefail
mkdir -p .whl && cp .wheels/*.whl .whl/
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
if [ "${PART:-k}" = k ]; then
  check "chained draft tests on the GPU (the device verdict, engine.window.kept_on_device)" tail_of 30 timeout 300 \
    python3 -m pytest -q -p no:cacheprovider -x tests/engine/test_draft_chain.py tests/engine/test_draft_graph.py \
    tests/engine/test_chaining.py
  step "Q4_K kernel by tile:real rows"
  check "bench_q4k_mma" timeout 240 python3 tests/gpu/bench_q4k_mma.py --rows 1,8:2,8:4,8,16:2,16:4,16:8,16 \
    --shapes "qkv,wo,gate|up,down"
  for t in 8 16; do
    step "8B, 4 and 8 real rows in a $t-row tile"
    check "profile tile $t" env TILE=$t timeout 150 python3 tests/gpu/profile_stage.py $M/l8b.gguf 4 8
  done
else
  for mid in 0 8; do
    step "8B bench and window costs, STRATA_MID_TILE=$mid"
    check "8B bench mid $mid" env STRATA_MID_TILE=$mid timeout 200 $S bench --model $M/l8b.gguf $B --streams 1,4,8 \
      --parallel 8 --window-costs 1,2,4,8,16
  done
  $S make-model --arch llama --shape smollm2-135m --mtp 1 --qtype Q4_1 --weights counting --out $M/count.gguf >/dev/null
  for mid in 0 8; do
    step "counting smollm2 --spec 4, STRATA_MID_TILE=$mid"
    check "counting spec 4 mid $mid" env STRATA_MID_TILE=$mid STRATA_DRAFT_GUARD=0 timeout 150 $S bench \
      --model $M/count.gguf --devices cuda:0 --spec 4 --draft mtp --streams 1,4 --parallel 4 --max-tokens 128 \
      --prompt-tokens 64 --ctx 1024 --window-costs 1,2,4,8,16
  done
  step "--batch-groups auto on two stages of one GPU (engine.group_choice), beside groups 1 and 2"
  for g in auto 1 2; do
    check "counting, 2 stages, groups $g" timeout 200 $S bench --model $M/count.gguf --devices cuda:0,cuda:0 \
      --parallel 4 --batch-groups $g --spec 4 --piped-mtp 3 --streams 4 --max-tokens 128 --prompt-tokens 64 --ctx 1024
  done
  export STRATA_MID_TILE=8
  check "batch-test 8b 6 slots sampled, mid tile" $BT --model $M/l8b.gguf --devices cuda:0 --parallel 6 \
    --temperature 0.8 --seed 4
  check "batch-test counting spec 4, 3 slots, mid tile" $BT --model $M/count.gguf --devices cuda:0 --parallel 3 \
    --draft mtp --spec 4
fi
summary
