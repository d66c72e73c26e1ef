#!/usr/bin/env bash
# Runs every test of a build in one CTest run and fails if any test lacks a label.
#   scripts/run-tests.sh BUILD_DIR [extra ctest args, e.g. -L unit]
# Unit tests run two at a time; integration, Slurm and GPU tests carry RUN_SERIAL (they start
# their own processes and clusters and would only fight over two cores). CTest's "Label Time
# Summary" at the end gives each label's wall time.
set -uo pipefail
build="${1:-build}"
shift || true
unlabelled=$(ctest --test-dir "$build" -N -LE '^(unit|integration|slurm|gpu)$' | grep -c 'Test *#' || true)
if ((unlabelled > 0)); then
  echo "error: $unlabelled test(s) carry none of the labels unit/integration/slurm/gpu:" >&2
  ctest --test-dir "$build" -N -LE '^(unit|integration|slurm|gpu)$' >&2
  exit 1
fi
exec ctest --test-dir "$build" --output-on-failure -j2 "$@"
