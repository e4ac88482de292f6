#!/usr/bin/env bash
# Issues 11 / 12, session 42: IQ2_XS, IQ2_S and IQ1_M as int8 codes under a float32 factor per 16 values
# (STRATA_IQ2_INT8=1, kind 8: the int8 decode, prompt and expert kernels) against the GGUF layout (its
# kernel, and the per-expert loop with host syncs for expert stacks). Short on purpose (the last
# minutes of a session's device time): the small MoE in each type batch-tested sampled with the codes,
# then the llama-3-8b shape IQ2_XS one and eight streams each way, the qwen3-30b-a3b shape IQ2_XS one
# stream each way. Carry [".whl"]. Log: $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
for qt in IQ2_XS IQ2_S IQ1_M; do
  $S make-model --arch qwen3moe --shape small --qtype $qt --out $M/moe-$qt.gguf >/dev/null
  check "batch-test moe small $qt int8 codes, sampled" env STRATA_IQ2_INT8=1 timeout 60 $S batch-test \
    --max-tokens 16 --model $M/moe-$qt.gguf --devices cuda:0 --parallel 4 --temperature 0.8 --seed 3
done
$S make-model --arch llama --shape llama-3-8b --qtype IQ2_XS --out $M/l8b.gguf >/dev/null
for f in 1 0; do
  check "bench 8b IQ2_XS int8=$f" env STRATA_IQ2_INT8=$f timeout 70 $S bench --model $M/l8b.gguf --streams 1,8 \
    --parallel 8 --prompt-tokens 256 --max-tokens 32 --ctx 512 --devices cuda:0
done
rm -f $M/l8b.gguf
$S make-model --arch qwen3moe --shape qwen3-30b-a3b --qtype IQ2_XS --out /dev/shm/a3b-iq2.gguf >/dev/null
for f in 1 0; do
  check "bench 30b-a3b IQ2_XS int8=$f" env STRATA_IQ2_INT8=$f timeout 80 $S bench --model /dev/shm/a3b-iq2.gguf \
    --streams 1 --parallel 1 --prompt-tokens 128 --max-tokens 16 --ctx 512 --devices cuda:0
done
rm -f /dev/shm/a3b-iq2.gguf
summary
