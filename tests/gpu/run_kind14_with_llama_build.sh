#!/usr/bin/env bash
# Session 45's plan for the next GPU call (written, not yet run; about 5 minutes): run_kind14_profile.sh on
# the GPU while llama.cpp builds on the machine's CPUs behind it (run_llama_cpp.sh BUILD_ONLY=1, about 3
# minutes, kept in /tmp/llama.cpp while the machine is warm). Carry [".whl", ".llamacpp"] after
# tests/gpu/prepare.sh and prepare_llama_cpp.sh. Then, within the 30 s the machine stays warm:
#   QTYPES="IQ3_S IQ2_XS" ENGINE=1 bash tests/gpu/run_llama_cpp.sh
# (llama.cpp and the engine on the same table-code files, same GPU). Logs: $OUT/log.txt, $OUT/llama_bg.log.
set -uo pipefail
OUT=${OUT:-./gpu-out}; mkdir -p "$OUT"; export OUT
BUILD_ONLY=1 bash "$(dirname "$0")/run_llama_cpp.sh" > "$OUT/llama_bg.log" 2>&1 &
bash "$(dirname "$0")/run_kind14_profile.sh"; rc=$?
wait $! && echo "llama.cpp build: $(tail -1 "$OUT/llama_bg.log")" || { echo "llama.cpp build FAILED"; tail -20 "$OUT/llama_bg.log"; }
exit $rc
