#!/usr/bin/env bash
# The GPU figures for the closing notes: exactness on 1 and 2 GPUs, then benches. Logs to $OUT.
# Ends with one PASS/FAIL line; exits non-zero if any check failed.
set -euo pipefail
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
check "make smol" $S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf
check "make count" $S make-model --arch llama --shape small --mtp 1 --weights counting --out $M/count.gguf
check "make countmoe" $S make-model --arch qwen3moe --shape small --mtp 1 --weights counting --out $M/countmoe.gguf
check "make inductionmoe" $S make-model --arch qwen3moe --shape tiny --mtp 1 --weights induction --out $M/inductionmoe.gguf
step "kernel tests"; check "kernel tests" tail_of 3 timeout 200 python3 -m pytest -q -p no:cacheprovider tests/engine/test_gpu_kernels.py
step "batch-test"
for L in "--devices cuda:0 --parallel 4 --spec 4" \
         "--devices cuda:0,cuda:1 --parallel 4 --batch-groups 2 --piped-mtp 1" \
         "--devices cuda:0,cuda:1 --parallel 4 --batch-groups 2 --piped-mtp 3 --temperature 0.8 --seed 7" \
         "--devices cuda:0,cuda:1 --parallel 2 --batch-groups 2 --piped-mtp 2"; do
  check "batch-test count.gguf $L" without "^#" timeout 120 $S batch-test --model $M/count.gguf --max-tokens 32 $L
done
check "batch-test countmoe.gguf piped 2, 2 GPUs" without "^#" timeout 120 $S batch-test --model $M/countmoe.gguf --devices cuda:0,cuda:1 --parallel 4 --batch-groups 2 --piped-mtp 2 --max-tokens 32
# induction models: the next token comes through attention, so drafts are accepted where KV rows and RoPE matter
for L in "--devices cuda:0 --parallel 4 --spec 4" \
         "--devices cuda:0,cuda:1 --parallel 4 --batch-groups 2 --piped-mtp 2" \
         "--devices cuda:0,cuda:1 --parallel 4 --batch-groups 2 --piped-mtp 3 --temperature 0.8 --seed 5"; do
  check "batch-test induction.gguf $L" without "^#" timeout 120 $S batch-test --model $M/induction.gguf --max-tokens 32 $L
done
check "batch-test inductionmoe.gguf piped 2, 2 GPUs" without "^#" timeout 120 $S batch-test --model $M/inductionmoe.gguf --devices cuda:0,cuda:1 --parallel 4 --batch-groups 2 --piped-mtp 2 --max-tokens 32
check "batch-test gemma3 tiny sampled, 2 GPUs" without "^#" timeout 120 $S batch-test --model $M/gemma3.gguf --devices cuda:0,cuda:1 --parallel 4 --batch-groups 2 --piped-mtp 2 --max-tokens 32 --temperature 0.9 --seed 3
step "bench smollm2-shaped Q4_1"
B="$S bench --model $M/smol.gguf --max-tokens 128 --prompt-tokens 128 --ctx 2048"
check "bench smol 1 GPU" timeout 150 $B --devices cuda:0 --streams 1,4,8
check "bench smol 2 GPUs 1 group" timeout 150 $B --devices cuda:0,cuda:1 --batch-groups 1 --streams 1,8 --parallel 8
check "bench smol 2 GPUs 2 groups" timeout 150 $B --devices cuda:0,cuda:1 --batch-groups 2 --streams 1,8 --parallel 8
step "bench counting model: drafts off / solo spec 4 / piped 3 on 2 GPUs"
C="$S bench --model $M/count.gguf --max-tokens 128 --ctx 2048"
check "bench count drafts off" timeout 100 $C --devices cuda:0 --streams 1,4
check "bench count spec 4" timeout 100 $C --devices cuda:0 --streams 1,4 --spec 4
check "bench count piped 3, 2 GPUs" timeout 100 $C --devices cuda:0,cuda:1 --batch-groups 2 --parallel 4 --streams 1,4 --piped-mtp 3
step "bench llama-3-8b-shaped Q4_K"
check "make l8b" $S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf
check "bench l8b 1 GPU" timeout 200 $S bench --model $M/l8b.gguf --devices cuda:0 --streams 1,8 --max-tokens 64 --ctx 2048
check "bench l8b 2 GPUs 2 groups" timeout 200 $S bench --model $M/l8b.gguf --devices cuda:0,cuda:1 --batch-groups 2 --parallel 8 --streams 1,8 --max-tokens 64 --ctx 2048
summary
