#!/usr/bin/env bash
# Issue 21: four stages on four GPUs (the nvidia-h200-x4 / h100-x4 kinds). With fewer GPUs the four stages
# share them (cuda:0 four times on one), which checks the script and the exactness, not the speed.
#   bash tests/gpu/run_four.sh    carry [".whl"]    (LLAMA=1: llama.cpp's layer split over the same GPUs too;
#                                                    carry [".whl", ".llamacpp"], its build takes ~3 min)
# 1. batch-test IDENTICAL, 4 and 8 slots in 4 groups: the counting model (acceptance near 1) at piped MTP
#    0-3, and the llama-3-8b and qwen3-30b-a3b shapes (Q4_K, random weights with a random MTP layer, made
#    here) at piped MTP 0 and 3, sampled.
# 2. strata bench, 1/2/4/8 streams, 8 slots, on both shapes: groups 1 and 4 without drafts, groups 4 with
#    piped MTP 3 and groups 1 with serial --spec 4, the drafts proposing the requests' own tokens at 90%
#    (--draft replay: random weights draft nothing); the bench's stage_busy_pct column is each stage's
#    GPU busy share. QUICK=1: the 8B shape only, streams 1 and 8.
# PART=exact or PART=bench runs one part (both together may pass a call's 10 minutes with the 30B shape).
# Logs to $OUT/log.txt.
set -euo pipefail
if [ -n "${LLAMA:-}" ]; then BUILD_ONLY=1 bash "$(dirname "$0")/run_llama_cpp.sh"; fi
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
ngpu=$(python3 -c 'import torch; print(torch.cuda.device_count())')
[ "$ngpu" -ge 1 ] || { echo "FAIL: no CUDA GPU"; exit 1; }
D4=$(python3 -c "print(','.join(f'cuda:{i % $ngpu}' for i in range(4)))")
echo "stages on $D4 ($ngpu GPUs)"
$S make-model --arch llama --shape small --mtp 1 --weights counting --out $M/count.gguf >/dev/null
$S make-model --arch llama --shape llama-3-8b --mtp 1 --qtype Q4_K --out $M/l8b.gguf >/dev/null
shapes=(l8b)
if [ -z "${QUICK:-}" ]; then
  $S make-model --arch qwen3moe --shape qwen3-30b-a3b --mtp 1 --qtype Q4_K --out $M/q30.gguf >/dev/null; shapes+=(q30)
fi
BT4="timeout 200 $S batch-test --devices $D4 --batch-groups 4 --max-tokens 24"
if [ "${PART:-exact}" = exact ]; then
step "exactness on four stages"
for pm in 0 1 2 3; do
  for n in 4 8; do check "batch-test counting $n slots piped $pm" $BT4 --model $M/count.gguf --parallel $n --piped-mtp $pm; done
done
for m in "${shapes[@]}"; do
  for pm in 0 3; do
    for n in 4 8; do
      check "batch-test $m $n slots piped $pm sampled" $BT4 --model $M/$m.gguf --parallel $n --piped-mtp $pm \
        --temperature 0.8 --seed 4
    done
  done
done
fi
[ "${PART:-bench}" = bench ] || { summary; exit 0; }
STREAMS=1,2,4,8; [ -z "${QUICK:-}" ] || STREAMS=1,8
for m in "${shapes[@]}"; do
  step "bench $m on four stages"
  BB="timeout 300 $S bench --model $M/$m.gguf --devices $D4 --parallel 8 --streams $STREAMS --prompt-tokens 512 \
    --max-tokens 128 --ctx 2048"
  check "$m groups 1" $BB --batch-groups 1
  check "$m groups 4" $BB --batch-groups 4
  check "$m groups 4 piped 3 (replay 0.9)" $BB --batch-groups 4 --piped-mtp 3 --draft replay --replay-accept 0.9
  check "$m groups 1 spec 4 (replay 0.9)" $BB --batch-groups 1 --spec 4 --draft replay --replay-accept 0.9
  if [ -n "${LLAMA:-}" ]; then
    L=/tmp/llama.cpp/build/bin
    check "llama-bench $m, layer split over $ngpu GPUs" timeout 300 $L/llama-bench -m $M/$m.gguf -ngl 99 -sm layer \
      -p 512 -n 128 -r 3 -o md
    check "llama-batched-bench $m" tail_of 8 timeout 300 $L/llama-batched-bench -m $M/$m.gguf -ngl 99 -sm layer \
      -c 8192 -npp 128 -ntg 128 -npl 1,2,4,8
  fi
done
summary
