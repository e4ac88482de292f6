#!/usr/bin/env bash
# The 2-stage sampled mismatch seen on 2026-12-01 (H200, stages cuda:0,cuda:0 split 12, 2 groups, T 0.7
# seed 5, 16 tokens: one slot DIFFERS at its last token, logits max|diff| 0.12; greedy IDENTICAL): the same
# check under each switch that changes how a window runs, and (TREES=dir of <commit>.tar.gz, the engine's
# and app's .py files at that commit) under earlier commits, so one call says which part it follows.
# The checks run PAR at a time (default 4; each holds two engines of the 8B shape, ~10 GB).
# carry [".whl"] (or .whl/llama.gguf and the wheels); on two GPUs DEV2=cuda:0,cuda:1 checks the real split.
set -euo pipefail
source "$(dirname "$0")/env.sh"
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
D=${DEV2:-cuda:0,cuda:0}; PAR=${PAR:-4}; L=$OUT/split; mkdir -p $L
BT="timeout 300 python3 -m app.cli batch-test --model $M/l8b.gguf --parallel 4 --temperature 0.7 --seed 5"
AS="--devices $D --layer-split 12 --batch-groups 2 --max-tokens 16"
NAMES=()
job() {   # job "name" cmd...: run in the background (at most PAR at once), log to $L/<n>.log
  local n=${#NAMES[@]}; NAMES+=("$1"); shift
  while [ "$(jobs -rp | wc -l)" -ge "$PAR" ]; do sleep 1; done
  ( rc=0; "$@" > $L/$n.log 2>&1 || rc=$?; echo $rc > $L/$n.rc ) &
}
job "as seen: $D split 12, 2 groups, 16 tokens" $BT $AS
job "the same again" $BT $AS
job "seed 6" $BT $AS --seed 6
job "one group" $BT --devices $D --layer-split 12 --batch-groups 1 --max-tokens 16
job "one stage, 2 groups" $BT --devices cuda:0 --batch-groups 2 --max-tokens 16
job "no split attention" env STRATA_ATTN_SPLIT=0 $BT $AS
job "no CUDA graphs" env STRATA_CUDA_GRAPHS=0 $BT $AS
job "no fused block" env STRATA_FUSED_BLOCK=0 $BT $AS
job "greedy on the same layout" $BT $AS --temperature 0
for t in ${TREES:+$TREES/*.tar.gz}; do
  c=$(basename $t .tar.gz); mkdir -p /tmp/tree/$c && tar -C /tmp/tree/$c -xzf $t
  job "at commit $c" env PYTHONPATH=/tmp/site:/tmp/tree/$c bash -c "cd /tmp/tree/$c && $BT $AS"
done
wait
for n in "${!NAMES[@]}"; do
  check "${NAMES[$n]}" bash -c "grep -v '^#.*memory' $L/$n.log | tail -8; exit \$(cat $L/$n.rc)"
done
summary
