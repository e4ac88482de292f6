#!/usr/bin/env bash
# Issues 13 / 12: what a decode window costs by its rows (1, 2, 4, 8, 16) and part (the layers, + the picks, +
# the drafter with chains of 3) on the llama-3-8b and qwen3-30b-a3b shapes with an MTP layer (strata bench
# --window-costs): the figure that says where drafts and piped MTP can pay on a dense and an MoE model.
#   bash tests/gpu/run_window_rows.sh     carry [".wheels", ".whl/llama.gguf"]
set -euo pipefail
mkdir -p .whl && cp .wheels/*.whl .whl/
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
for spec in "llama llama-3-8b" "qwen3moe qwen3-30b-a3b"; do
  set -- $spec
  $S make-model --arch $1 --shape $2 --mtp 1 --qtype Q4_K --out $M/$2.gguf >/dev/null
  step "$2 with an MTP layer"
  check "$2 window costs" timeout 240 $S bench --model $M/$2.gguf --devices cuda:0 --spec 4 --draft mtp \
    --streams 1 --max-tokens 16 --prompt-tokens 64 --ctx 1024 --window-costs 1,2,4,8,16
  rm -f $M/$2.gguf
done
summary
