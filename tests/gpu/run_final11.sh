#!/usr/bin/env bash
# Issue 11 end of session: kernel tests under CUDA; exactness (batch-test) on the llama-3-8b shape greedy
# and sampled on 1 GPU and in 2 stages / 2 groups with a non-default split, the counting model with
# piped MTP 3, the MoE small model with MTP spec 3 (the 2-stage runs on two GPUs where there are two,
# else both stages on cuda:0); decode benches (8B 1 and 8 streams, SmolLM2 1 stream, the qwen3-30b-a3b
# MoE shape 1 stream); the host parts of a decode step. Slots decoding alone run the 1-row tile, together
# the 16-row one: batch-test compares the two.
set -euo pipefail
source "$(dirname "$0")/env.sh"
NGPU=$(python3 -c 'import torch; print(torch.cuda.device_count())')
DEV2=cuda:0,cuda:1; [ "$NGPU" -ge 2 ] || DEV2=cuda:0,cuda:0
check "kernel tests" timeout 240 python3 -m pytest -q -p no:cacheprovider -x tests/engine/test_moe_gemv.py \
  tests/engine/test_dp4a_gemv.py tests/engine/test_gpu_kernels.py tests/engine/test_attention_kernel.py \
  tests/engine/test_mtp_train_gpu.py
$S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf >/dev/null
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
$S make-model --arch llama --shape small --mtp 1 --weights counting --out $M/count.gguf >/dev/null
$S make-model --arch qwen3moe --shape small --mtp 1 --qtype Q4_K --out $M/moe.gguf >/dev/null
BT="timeout 150 $S batch-test --max-tokens 16"
check "batch-test 8b 1 GPU greedy" $BT --model $M/l8b.gguf --devices cuda:0 --parallel 4
check "batch-test 8b 1 GPU sampled" $BT --model $M/l8b.gguf --devices cuda:0 --parallel 4 --temperature 0.8 --seed 3
check "batch-test 8b $DEV2 split 12, 2 groups, sampled" $BT --model $M/l8b.gguf --devices $DEV2 --layer-split 12 \
  --parallel 4 --batch-groups 2 --temperature 0.7 --seed 5
check "batch-test counting $DEV2 piped 3" $BT --model $M/count.gguf --devices $DEV2 --parallel 4 --batch-groups 2 \
  --piped-mtp 3
check "batch-test moe spec 3 sampled" $BT --model $M/moe.gguf --devices cuda:0 --parallel 4 --draft mtp --spec 3 \
  --temperature 0.8 --seed 3
B8="$S bench --model $M/l8b.gguf --devices cuda:0 --max-tokens 64 --ctx 1024"
check "bench 8b 1,8" timeout 150 $B8 --streams 1,8 --parallel 8
check "bench smol 1,8" timeout 90 $S bench --model $M/smol.gguf --devices cuda:0 --streams 1,8 --parallel 8 --max-tokens 128 --ctx 1024
check "host parts 8b" timeout 150 python3 tests/gpu/profile_host.py $M/l8b.gguf 60
if [ -n "${MOE:-}" ]; then
  $S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype Q4_K --out $M/q30.gguf >/dev/null
  check "bench 30b-a3b 1" timeout 200 $S bench --model $M/q30.gguf --devices cuda:0 --streams 1 --max-tokens 64 --ctx 1024
fi
summary
