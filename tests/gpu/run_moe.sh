#!/usr/bin/env bash
# Issue 12 on one GPU: the device-side MoE decode (engine.kernels.moe_gemv) exact and fast. Kernel tests
# under CUDA; the qwen3moe small model IDENTICAL in batch-test (greedy, sampled with MTP spec 3, two
# stages on one GPU with 2 groups and piped MTP 2); the qwen3-30b-a3b shape (Q4_K): bench 1 and 4
# streams and a 512-token prompt, the MoE kernels alone at each configuration (bench_moe.py), where a
# decode tile's time goes
# (profile_stage), and the host's share of a step.
set -euo pipefail
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
check "moe + dp4a kernel tests, fast block" timeout 240 python3 -m pytest -q -p no:cacheprovider -x \
  tests/engine/test_moe_gemv.py tests/engine/test_dp4a_gemv.py tests/engine/test_gpu_kernels.py
$S make-model --arch qwen3moe --shape small --mtp 1 --qtype Q4_K --out $M/moe.gguf >/dev/null
BT="timeout 150 $S batch-test --model $M/moe.gguf --max-tokens 24"
check "batch-test moe greedy" $BT --devices cuda:0 --parallel 4
check "batch-test moe sampled spec 3" $BT --devices cuda:0 --parallel 4 --draft mtp --spec 3 --temperature 0.8 --seed 3
check "batch-test moe 2 stages 2 groups piped 2" $BT --devices cuda:0,cuda:0 --parallel 4 --batch-groups 2 --piped-mtp 2
T0=$(date +%s); $S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype Q4_K --out $M/q30.gguf >/dev/null
echo "make-model qwen3-30b-a3b: $(( $(date +%s) - T0 )) s, $(du -h $M/q30.gguf | cut -f1)"
check "moe kernels alone, 30b-a3b layer 0" timeout 240 python3 tests/gpu/bench_moe.py $M/q30.gguf
check "bench 30b-a3b 1,4" timeout 240 $S bench --model $M/q30.gguf --devices cuda:0 --streams 1,4 --parallel 4 \
  --max-tokens 64 --ctx 1024
check "bench 30b-a3b prompt 512" timeout 200 $S bench --model $M/q30.gguf --devices cuda:0 --streams 1 \
  --prompt-tokens 512 --max-tokens 16 --ctx 2048
check "tile profile 30b-a3b" timeout 150 python3 tests/gpu/profile_stage.py $M/q30.gguf 1 2 8
check "host parts 30b-a3b" timeout 150 python3 tests/gpu/profile_host.py $M/q30.gguf 40
$S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf >/dev/null
check "bench smol 1 (dense regression)" timeout 60 $S bench --model $M/smol.gguf --devices cuda:0 --streams 1 \
  --max-tokens 128 --ctx 1024
summary
