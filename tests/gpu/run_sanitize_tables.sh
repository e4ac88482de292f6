#!/usr/bin/env bash
# Session 46: which kernel reads out of bounds in the table-code sweep (tests/gpu/sanitize_tables.py under
# compute-sanitizer; QTYPES, default IQ2_XS; down then gate|up). Carry [".whl"]. About 3 minutes.
set -euo pipefail
source "$(dirname "$0")/env.sh"
for q in ${QTYPES:-IQ2_XS}; do
  for shape in 4096x14336 28672x4096; do
    check "memcheck $q $shape" timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 --print-limit 3 \
      env QTYPE=$q SHAPE=$shape python3 tests/gpu/sanitize_tables.py
  done
done
summary
