#!/usr/bin/env bash
# In-job recovery speed: from the SIGKILL of a worker to the first training step
# completed after it, for the demo's CNN (--arch cnn --data fashion-mnist) with 4 CPU workers,
# over KILLS kills (ranks in turn, rank 0 included), cold (a replacement process started then)
# and with a warm worker (--warm-workers 1), and in the same run the old path (the job fails, is
# started again and resumes from its last checkpoint). Prints every kill and the
# median and max of each path. Target: median <= 3 s, max <= 10 s. Method and figures:
# docs/bench-recovery.md.
#
#   BUILD_DIR=build bench/recovery.sh
#   env: KILLS=10 (in-job recovery kills, cold and with a warm worker each)  OLD_KILLS=3
#        (old-path kills)  CKPT=100 (old path: --checkpoint-every)  DATA=fashion-mnist (any
#        --data)  WARM=0 (skip the --warm-workers 1 run)  LOGS=DIR (keep the work folder: the
#        coordinators' logs and each job's output, dist_file.NAME.out)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN=${BUILD_DIR:-build}/bin
[[ $BIN = /* ]] || BIN="$PWD/$BIN"
PY="${DDP_TORCH_PYTHON:-$("$ROOT/scripts/setup-deps.sh" --print-venv)/bin/python}"
[[ -x $BIN/ddp-trainer ]] || { echo "bench/recovery.sh: $BIN/ddp-trainer not built" >&2; exit 1; }
WORK=${LOGS:-$(mktemp -d /tmp/ddp-bench-recovery.XXXXXX)}
mkdir -p "$WORK"
[[ -n ${LOGS:-} ]] || trap 'rm -rf "$WORK"' EXIT
echo "bench/recovery.sh: $(uptime)"
DDP_BIN_DIR="$BIN" WORK="$WORK" "$PY" "$ROOT/bench/recovery/recovery_bench.py"
