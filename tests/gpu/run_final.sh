#!/usr/bin/env bash
# The GPU figures for the closing notes: exactness on 1 and 2 GPUs, then benches. Logs to $OUT.
set -u
source "$(dirname "$0")/env.sh"
step() { echo; echo "=== $*"; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
$S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf
$S make-model --arch llama --shape small --mtp 1 --weights counting --out $M/count.gguf
$S make-model --arch qwen3moe --shape small --mtp 1 --weights counting --out $M/countmoe.gguf
step "kernel tests"; timeout 200 python3 -m pytest -q -p no:cacheprovider tests/engine/test_gpu_kernels.py 2>&1 | tail -3
step "batch-test"
for L in "--devices cuda:0 --parallel 4 --spec 4" \
         "--devices cuda:0,cuda:1 --parallel 4 --batch-groups 2 --piped-mtp 1" \
         "--devices cuda:0,cuda:1 --parallel 4 --batch-groups 2 --piped-mtp 3 --temperature 0.8 --seed 7" \
         "--devices cuda:0,cuda:1 --parallel 2 --batch-groups 2 --piped-mtp 2"; do
  echo "--- count.gguf $L"; timeout 120 $S batch-test --model $M/count.gguf --max-tokens 32 $L | grep -v "^#"
done
echo "--- countmoe.gguf piped 2, 2 GPUs"; timeout 120 $S batch-test --model $M/countmoe.gguf --devices cuda:0,cuda:1 --parallel 4 --batch-groups 2 --piped-mtp 2 --max-tokens 32 | grep -v "^#"
echo "--- gemma3 tiny sampled, 2 GPUs"; timeout 120 $S batch-test --model $M/gemma3.gguf --devices cuda:0,cuda:1 --parallel 4 --batch-groups 2 --piped-mtp 2 --max-tokens 32 --temperature 0.9 --seed 3 | grep -v "^#"
step "bench smollm2-shaped Q4_1"
B="$S bench --model $M/smol.gguf --max-tokens 128 --prompt-tokens 128 --ctx 2048"
timeout 150 $B --devices cuda:0 --streams 1,4,8
timeout 150 $B --devices cuda:0,cuda:1 --batch-groups 1 --streams 1,8 --parallel 8
timeout 150 $B --devices cuda:0,cuda:1 --batch-groups 2 --streams 1,8 --parallel 8
step "bench counting model: drafts off / solo spec 4 / piped 3 on 2 GPUs"
C="$S bench --model $M/count.gguf --max-tokens 128 --ctx 2048"
timeout 100 $C --devices cuda:0 --streams 1,4
timeout 100 $C --devices cuda:0 --streams 1,4 --spec 4
timeout 100 $C --devices cuda:0,cuda:1 --batch-groups 2 --parallel 4 --streams 1,4 --piped-mtp 3
step "bench llama-3-8b-shaped Q4_K"
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf
timeout 200 $S bench --model $M/l8b.gguf --devices cuda:0 --streams 1,8 --max-tokens 64 --ctx 2048
timeout 200 $S bench --model $M/l8b.gguf --devices cuda:0,cuda:1 --batch-groups 2 --parallel 8 --streams 1,8 --max-tokens 64 --ctx 2048
echo; echo "=== done"
