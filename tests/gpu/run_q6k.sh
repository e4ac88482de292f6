#!/usr/bin/env bash
# Issue 11 / 12: Q6_K, Q5_K and Q5_1 repacked as int8 values (engine.kernels.packed kinds 8 and 9) against the
# GGUF-layout kernel and the host-synced expert loop they replace (STRATA_GPU_KEEP=Q6_K). A Q4_K_M file has its
# head in Q6_K and Q6_K v and down matrices (Qwen3-30B-A3B's: down experts in half the layers).
# PART=a: the kernel tests on the GPU, then the llama-3-8b shape with a Q6_K head, v and down, one and eight
# streams each way (twice, alternating), and a sampled batch-test. PART=b: the qwen3-30b-a3b shape with Q6_K
# down experts (one and four streams; the old path only at one stream, 32 tokens: it syncs per expert), and
# batch-tests of the small MoE shape with Q6_K down experts and of Q5_K / Q5_1. Default: both.
# Carry [".whl"]. Log: $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
PART=${PART:-ab}
if [[ $PART == *a* ]]; then
  check "kernel tests Q6_K Q5_K Q5_1" timeout 300 python3 -m pytest -q -p no:cacheprovider tests/engine/test_packed.py \
    tests/engine/test_dp4a_gemv.py tests/engine/test_moe_gemv.py -k "Q6_K or Q5_K or Q5_1 or int8_value"
  $S make-model --arch llama --shape llama-3-8b --qtype Q4_K \
    --qtype-map 'output.weight=Q6_K,*.attn_v.weight=Q6_K,*.ffn_down.weight=Q6_K' --out $M/l8b-q6.gguf >/dev/null
  for keep in Q6_K '' Q6_K ''; do
    check "bench 8b Q6_K head/v/down keep=${keep:-none}" env STRATA_GPU_KEEP=$keep timeout 150 $S bench \
      --model $M/l8b-q6.gguf --streams 1,8 --parallel 8 $B
  done
  check "batch-test 8b Q6_K head/v/down sampled 8 slots" $BT --model $M/l8b-q6.gguf --devices cuda:0 --parallel 8 \
    --temperature 0.8 --seed 6
  rm -f $M/l8b-q6.gguf
fi
if [[ $PART == *b* ]]; then
  $S make-model --arch qwen3moe --shape small --mtp 1 --qtype Q4_K --qtype-map '*.ffn_down_exps.weight=Q6_K' \
    --out $M/moe-q6.gguf >/dev/null
  check "batch-test moe small Q6_K down experts sampled, spec 3" $BT --model $M/moe-q6.gguf --devices cuda:0 \
    --parallel 4 --draft mtp --spec 3 --temperature 0.8 --seed 3
  $S make-model --arch llama --shape small --qtype Q5_K --qtype-map '*.ffn_down.weight=Q5_1' --out $M/q5k.gguf >/dev/null
  check "batch-test small Q5_K / Q5_1 sampled 4 slots" $BT --model $M/q5k.gguf --devices cuda:0 --parallel 4 \
    --temperature 0.8 --seed 5
  $S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype Q4_K --qtype-map '*.ffn_down_exps.weight=Q6_K' \
    --out /dev/shm/a3b-q6.gguf >/dev/null
  check "bench 30b-a3b Q6_K down experts" timeout 200 $S bench --model /dev/shm/a3b-q6.gguf --streams 1,4 \
    --parallel 4 $B
  check "bench 30b-a3b Q6_K down experts keep=Q6_K, 1 stream" env STRATA_GPU_KEEP=Q6_K timeout 200 $S bench \
    --model /dev/shm/a3b-q6.gguf --streams 1 --parallel 1 --prompt-tokens 128 --max-tokens 32 --ctx 1024 \
    --devices cuda:0
  rm -f /dev/shm/a3b-q6.gguf
fi
summary
