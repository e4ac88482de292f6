#!/usr/bin/env bash
# Issue 16's last GPU figures: a real shape of the architectures not yet benched on a GPU, qwen3next
# (Qwen3-Next-80B-A3B's shape, Q4_K, ~45 GB) and glm4moe (GLM-4.5-Air's, ~60 GB: only where the disk holds
# it, the 2-GPU kind), each batch-tested and benched at 1 and 4 streams with and without MTP drafts (spec 3).
# DEVS=cuda:0,cuda:1 splits them over two GPUs (the 80B fits one H200).
set -euo pipefail
source "$(dirname "$0")/env.sh"
DEVS=${DEVS:-cuda:0}
for job in qwen3next:qwen3-next-80b-a3b:50 glm4moe:glm-4.5-air:70; do
  IFS=: read -r arch shape need_gb <<< "$job"
  free_gb=$(df -BG --output=avail $M | tail -1 | tr -dc 0-9)
  if [ "$free_gb" -lt "$need_gb" ]; then echo "--- $shape: $free_gb GB free, needs about $need_gb: not run"; continue; fi
  $S make-model --arch $arch --shape $shape --mtp 1 --qtype Q4_K --out $M/real.gguf >/dev/null
  check "batch-test $shape spec 3 sampled" timeout 200 $S batch-test --model $M/real.gguf --devices $DEVS \
    --parallel 4 --max-tokens 16 --draft mtp --spec 3 --temperature 0.8 --seed 5
  B="$S bench --model $M/real.gguf --devices $DEVS --max-tokens 64 --ctx 2048 --prompt-tokens 512 --streams 1,4 --parallel 4"
  check "bench $shape" timeout 200 $B
  check "bench $shape MTP spec 3" timeout 200 $B --draft mtp --spec 3
  rm -f $M/real.gguf
done
summary
