#!/usr/bin/env bash
# Where decode time goes on one GPU (issue 11): the host side of one stream's decode steps and the
# GPU kernels of a decode tile (1 and 8 real rows), on the llama-3-8b and SmolLM2 shapes; the decode kernel's sweep on the
# 8B shapes. One PASS/FAIL line last.
set -euo pipefail
source "$(dirname "$0")/env.sh"
$S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $M/smol.gguf >/dev/null
$S make-model --arch llama --shape llama-3-8b --qtype Q4_K --out $M/l8b.gguf >/dev/null
profile_host() {   # full report to $OUT/host-NAME.txt, the headline lines here
  timeout 150 python3 tests/gpu/profile_host.py "$2" "$3" > "$OUT/host-$1.txt" 2>&1 || { tail -20 "$OUT/host-$1.txt"; return 1; }
  grep -E "steps|GPU kernels" "$OUT/host-$1.txt"
}
check "host profile 8b" profile_host 8b $M/l8b.gguf 60
check "host profile smol" profile_host smol $M/smol.gguf 100
check "decode tile 8b" timeout 150 python3 tests/gpu/profile_stage.py $M/l8b.gguf 1 8
check "decode tile smol" timeout 150 python3 tests/gpu/profile_stage.py $M/smol.gguf 1

[ -n "${SWEEP:-}" ] && check "kernel sweep 8b" python3 tests/gpu/bench_matmul.py --sweep --only llama-3-8b --json "$OUT/matmul.json"
summary
