#!/usr/bin/env bash
# Issue 16 on the GPU: glm4moe and the hybrids (qwen35, qwen35moe, qwen3next) exact on 1 and 2 GPUs
# (batch-test: piped MTP, greedy and sampled), their reference tests under CUDA, and a speed figure for
# one real dense hybrid shape (Qwen3.5-9B's, Q4_K) with and without MTP drafts. Needs 2 GPUs for the
# split checks (run with kind nvidia-h200-x2; on one GPU: DEV2=cuda:0,cuda:0 puts both stages on it).
# NO_BENCH=1 leaves out the benchmarks; ARCHS="qwen35 ..." picks the batch-tested architectures. The delta
# net's recurrence runs as Triton kernels (engine.kernels.gdn_rows; hybrid stages then replay CUDA
# graphs); the 9B bench also runs with STRATA_GPU_GDN=0 (torch rows, eager), then the qwen3.5-35b-a3b shape.
# PROFILE=1 then profiles a 9B decode row and a 35B prompt tile (tests/gpu/profile_stage.py).
set -euo pipefail
source "$(dirname "$0")/env.sh"
check "delta net kernel test" timeout 120 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_gdn_rows.py tests/engine/test_hybrid.py
for a in ${ARCHS:-qwen35 qwen35moe qwen3next glm4moe}; do
  $S make-model --arch $a --shape small --mtp 1 --qtype Q4_K --out $M/$a.gguf >/dev/null
  check "batch-test $a 1 gpu spec 3" timeout 150 $S batch-test --model $M/$a.gguf --devices cuda:0 --parallel 4 \
    --max-tokens 16 --draft mtp --spec 3
  check "batch-test $a 2 gpus piped 2 sampled" timeout 150 $S batch-test --model $M/$a.gguf --devices ${DEV2:-cuda:0,cuda:1} \
    --parallel 4 --batch-groups 2 --piped-mtp 2 --max-tokens 16 --temperature 0.8 --seed 5
done
[ -n "${NO_BENCH:-}" ] && { summary; exit; }
$S make-model --arch qwen35 --shape qwen3.5-9b --mtp 1 --qtype Q4_K --out $M/q35-9b.gguf >/dev/null
B="$S bench --model $M/q35-9b.gguf --devices cuda:0 --max-tokens 64 --ctx 1024 --streams 1,4 --parallel 4"
check "bench qwen3.5-9b shape, no drafts, torch recurrence" env STRATA_GPU_GDN=0 timeout 300 $B
check "bench qwen3.5-9b shape, no drafts" timeout 300 $B
check "bench qwen3.5-9b shape, MTP spec 3" timeout 300 $B --draft mtp --spec 3
$S make-model --arch qwen35moe --shape qwen3.5-35b-a3b --mtp 1 --qtype Q4_K --out $M/q35-35b.gguf >/dev/null
B="$S bench --model $M/q35-35b.gguf --devices cuda:0 --max-tokens 64 --ctx 1024 --streams 1,4 --parallel 4"
check "bench qwen3.5-35b-a3b shape, no drafts" timeout 300 $B
check "bench qwen3.5-35b-a3b shape, MTP spec 3" timeout 300 $B --draft mtp --spec 3
if [ -n "${PROFILE:-}" ]; then     # where a decode row and a prompt tile spend their time
  check "profile qwen3.5-9b decode row" timeout 120 python3 tests/gpu/profile_stage.py $M/q35-9b.gguf 1
  check "profile qwen3.5-35b-a3b prompt tile" timeout 150 python3 tests/gpu/profile_stage.py $M/q35-35b.gguf prompt
fi
summary
