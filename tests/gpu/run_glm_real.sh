#!/usr/bin/env bash
# Issue 16: the glm4moe architecture at GLM-4.5-Air's shape (106B, 128 experts of 8) on one GPU. The Q4_K file
# (~63 GB) does not fit the one-GPU machine's disk, so the experts go IQ4_XS (~58 GB, no MTP layer) and the file
# lives in /dev/shm where that has room (QTYPE_MAP, DIR override): a small glm4moe with IQ4_XS experts batch-tested first; strata bench at 1 and 4 streams
# (512-token prompts; BENCH=0 leaves it out), then a sampled batch-test at 4 slots. Log to $OUT/log.txt.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
df -BG /dev/shm $M | cat
DIR=${DIR:-/dev/shm}
[ "$(df -BG --output=avail $DIR | tail -1 | tr -dc 0-9)" -ge 62 ] || DIR=$M
F=$DIR/glm-air.gguf
$S make-model --arch glm4moe --shape small --qtype Q4_K --qtype-map '*_exps.weight=IQ4_XS' --out $M/glm-small.gguf >/dev/null
check "batch-test glm4moe small, IQ4_XS experts" timeout 100 $S batch-test --model $M/glm-small.gguf --devices cuda:0 \
  --parallel 4 --max-tokens 16 --temperature 0.8 --seed 5
[ ${#FAILED[@]} -eq 0 ] || summary
check "make glm-4.5-air" tail_of 4 timeout 150 bash -c "time $S make-model --arch glm4moe --shape glm-4.5-air \
  --qtype Q4_K --qtype-map '${QTYPE_MAP:-*_exps.weight=IQ4_XS}' --out $F"
ls -la $F && $S inspect $F 2>&1 | head -12
[ "${BENCH:-1}" = 0 ] || check "bench glm-4.5-air" timeout 200 $S bench --model $F --devices cuda:0 --max-tokens 64 --ctx 2048 \
  --prompt-tokens 512 --streams 1,4 --parallel 4
check "batch-test glm-4.5-air sampled" timeout 170 $S batch-test --model $F --devices cuda:0 --parallel 4 \
  --max-tokens 16 --temperature 0.8 --seed 5
rm -f $F
summary
