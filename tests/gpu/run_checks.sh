#!/usr/bin/env bash
# GPU checks and benchmarks on the H200 machine (device tool). Not run by CI.
# Usage (there): bash tests/gpu/run_checks.sh [quick|full]   — logs go to $OUT (or ./gpu-out).
# Ends with one PASS/FAIL line; exits non-zero if any check failed.
set -euo pipefail
MODE=${1:-quick}
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpus.txt"
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, "gpus", torch.cuda.device_count())'
NGPU=$(python3 -c 'import torch; print(torch.cuda.device_count())')
step "GPU unit tests"
check "kernel tests" tail_of 15 timeout 300 python3 -m pytest -q -p no:cacheprovider tests/engine/test_quant.py -k "kernel or triton"
step "models"
check "make smol" $S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf
step "generate on GPU (MoE)"
check "generate qwen3moe" timeout 120 $S generate --model $M/qwen3moe.gguf --devices cuda:0 --prompt "Hello" --max-tokens 8 --json
step "batch-test on one GPU"
check "batch-test llama spec 3 sampled" timeout 300 $S batch-test --model $M/llama.gguf --devices cuda:0 --parallel 4 --spec 3 --max-tokens 24 --temperature 0.8 --seed 3
check "batch-test qwen3moe" timeout 300 $S batch-test --model $M/qwen3moe.gguf --devices cuda:0 --parallel 4 --max-tokens 24
if [ "$NGPU" -ge 2 ]; then
  step "batch-test on two GPUs"
  check "batch-test llama 2 GPUs piped 2" timeout 300 $S batch-test --model $M/llama.gguf --devices cuda:0,cuda:1 --parallel 4 --batch-groups 2 --piped-mtp 2 --max-tokens 24 --temperature 0.7 --seed 5
  check "batch-test gemma3 2 GPUs" timeout 300 $S batch-test --model $M/gemma3.gguf --devices cuda:0,cuda:1 --parallel 2 --max-tokens 24
fi
step "bench smollm2-shaped Q4_1, one GPU"
check "bench smol" timeout 300 $S bench --model $M/smol.gguf --devices cuda:0 --streams 1,4,8 --max-tokens 64 --ctx 1024
if [ "$MODE" = full ]; then
  check "make l8b" $S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf
  step "bench llama-3-8b-shaped Q4_K"
  check "bench l8b 1 GPU" timeout 400 $S bench --model $M/l8b.gguf --devices cuda:0 --streams 1,8 --max-tokens 64 --ctx 1024
  if [ "$NGPU" -ge 2 ]; then
    check "bench l8b 2 GPUs" timeout 400 $S bench --model $M/l8b.gguf --devices cuda:0,cuda:1 --streams 1,8 --max-tokens 64 --ctx 1024
  fi
fi
summary
