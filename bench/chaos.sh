#!/usr/bin/env bash
# Chaos: the same job trained fault-free and then under a seeded stream of real faults (SIGKILLs
# of workers, of two nodes' workers, of the coordinator and of a node's task tree; SIGSTOPs long
# and short; a full checkpoint tmpfs; a SIGUSR1 preemption and its requeue; a slow rank; kills
# during a checkpoint write, an evaluation and a stop). Prints the report (per kind: injected,
# survived in the job, by a requeue, unrecoverable, time lost; ETTR; final.pt against the
# reference) and writes it to REPORT. Method and figures: docs/bench-chaos.md.
#
#   BUILD_DIR=build bench/chaos.sh [--duration MINUTES] [--seed S] [--every A-B] [--replay REPORT]
#   env: REPORT=FILE (default ./chaos-report.md)  LOGS=DIR (keep the work folder there)
#   more driver options: --steps-per-epoch N --epochs E (size the job by hand), --min-faults N,
#   --min-kinds N (fail below them)
# Exit 0: every fault survived, final.pt bit for bit the reference's; 1: not; 2: bad usage.
# Root is needed for the full-disk fault (mount -t tmpfs); without it that kind is skipped.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN=${BUILD_DIR:-build}/bin
[[ $BIN = /* ]] || BIN="$PWD/$BIN"
PY="${DDP_TORCH_PYTHON:-$("$ROOT/scripts/setup-deps.sh" --print-venv)/bin/python}"
[[ -x $BIN/ddp-trainer ]] || { echo "bench/chaos.sh: $BIN/ddp-trainer not built" >&2; exit 2; }
WORK=${LOGS:-$(mktemp -d /tmp/ddp-bench-chaos.XXXXXX)}
mkdir -p "$WORK"
[[ -n ${LOGS:-} ]] || trap 'umount -l "$WORK/chaos/ck" 2>/dev/null || true; rm -rf "$WORK"' EXIT
REPORT=${REPORT:-$PWD/chaos-report.md}
echo "bench/chaos.sh: $(uptime)"
"$PY" "$ROOT/bench/chaos/chaos.py" --bin "$BIN" --work "$WORK" --report "$REPORT" "$@"
