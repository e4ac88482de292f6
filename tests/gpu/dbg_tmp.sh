set -euo pipefail
mkdir -p .whl && cp .wheels/*.whl .whl/
source tests/gpu/env.sh
D=/tmp/mdl; MD=$D/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f $MD ] || { cat $D/a .mdl/b > $MD; }
G="timeout 150 $S bench --model $MD --devices cuda:0 --streams 1 --parallel 4 --max-tokens 128 --ctx 2048 --prompt-kind code"
STRATA_DRAFT_GUARD_LOG=1 STRATA_WINDOW_LOG=1 $G --spec 4 2>&1 | head -80
