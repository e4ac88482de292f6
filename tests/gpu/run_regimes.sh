#!/usr/bin/env bash
# Issue 17 / 11: why one process decodes a lone stream at ~0.75 ms a chained window and the next at ~0.9
# (the "two regimes": H100 and H200, 2026-12-05; pinning both processes to CPUs 2-3 did not change it).
# Runs the same plain one-stream bench REPEAT times under each variant, with the GPU's SM clock and power
# sampled beside each run (nvidia-smi every 100 ms: min / median / max), so a regime can be matched to a
# clock, a CPU placement or the interpreter's GIL switch interval:
#   default           as a user runs it
#   one-cpu           taskset -c 2 (engine and stage threads on one core)
#   switch-0.5ms      sys.setswitchinterval(0.0005) (default 5 ms: how long a thread waiting for the GIL waits)
#   switch-50ms       sys.setswitchinterval(0.05)
#   one-cpu-0.5ms     both
#   depth-2           STRATA_CHAIN_DEPTH=2 (two chained windows queued beyond the oldest in flight; slower on
#                     2026-12-02, when a plain window took ~1.3 ms: measured again at ~0.75)
# The window logs of 2026-12-05 (run_guard_windows.sh) put plain chained windows at p10 ~640 us, p50 ~720,
# p90 ~800-950 from commit to commit in fast processes (p50 ~900 in a slow one) against 595 us for the 1-row
# graph alone: the rest is the device waiting for the host's next window.
# On a synthetic model of the default model's shape (no carry of the real model needed).
#   bash tests/gpu/run_regimes.sh     carry [".wheels", ".whl/llama.gguf"]
# REPEAT (3), MAXTOK (512), VARIANTS (all of the above) size it.
set -euo pipefail
mkdir -p .whl && cp .wheels/*.whl .whl/
source "$(dirname "$0")/env.sh"
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
MD=$M/smol.gguf
$S make-model --arch llama --shape smollm2-135m --qtype Q4_1 --out $MD >/dev/null
run() {   # run VARIANT: one bench under it, with the clocks sampled beside it
  local v=$1 pre=() sw=""
  case $v in
    one-cpu) pre=(taskset -c 2) ;;
    switch-0.5ms) sw=0.0005 ;;
    switch-50ms) sw=0.05 ;;
    one-cpu-0.5ms) pre=(taskset -c 2); sw=0.0005 ;;
    depth-2) pre=(env STRATA_CHAIN_DEPTH=2) ;;
  esac
  nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader,nounits -lms 100 > /tmp/clk.txt 2>/dev/null & local smi=$!
  check "$v" "${pre[@]}" env SWITCH="$sw" timeout 120 python3 -c '
import os, runpy, sys
if os.environ.get("SWITCH"):
    sys.setswitchinterval(float(os.environ["SWITCH"]))
sys.argv = ["strata"] + sys.argv[1:]
runpy.run_module("app.cli", run_name="__main__")' bench --model $MD --devices cuda:0 --streams 1 \
    --max-tokens ${MAXTOK:-512} --ctx 2048 --prompt-kind code > /tmp/bench.txt 2>&1 || true
  { grep -A1 "^ streams" /tmp/bench.txt || tail -n 3 /tmp/bench.txt; } | tail -n 1 | \
    awk -v v="$v" '{printf "%-14s %9s tok/s  window %s ms", v, $4, $12}'
  kill $smi 2>/dev/null || true; wait $smi 2>/dev/null || true
  python3 -c '
import statistics, sys
rows = [l.split(",") for l in open("/tmp/clk.txt") if l.count(",") == 1]
sm = sorted(float(a) for a, _ in rows if a.strip().replace(".", "").isdigit())
pw = sorted(float(b) for _, b in rows if b.strip().replace(".", "").isdigit())
if sm:
    print(f"   SM MHz {sm[0]:.0f} / {statistics.median(sm):.0f} / {sm[-1]:.0f}   W {pw[0]:.0f} / {statistics.median(pw):.0f} / {pw[-1]:.0f}")
else:
    print("   (no clock samples)")'
}
for r in $(seq 1 ${REPEAT:-3}); do
  step "round $r"
  for v in ${VARIANTS:-default one-cpu switch-0.5ms switch-50ms one-cpu-0.5ms depth-2}; do run $v; done
done
summary
