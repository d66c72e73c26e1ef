#!/usr/bin/env bash
# Node 0's loss with the standby coordinator: from the SIGKILL of every process of node 0 (its
# task, the coordinator and its workers) to the first training step completed after it, over
# KILLS faked 3-node steps (2 nodes x 2 CPU workers + 1 spare, the MLP of the recovery tests),
# each killed at a random step. Node 1 takes the job over (coordinator epoch 1) and the spare
# takes node 0's ranks; every run must end exit 0 with final.pt bit for bit the uninterrupted
# run's. Prints each kill, the median and max, and the machine and its load. Target: median
# <= 5 s, max <= 10 s on a 2-core machine. First, the standby's cost on a job without faults:
# the epoch lease's check per coordinator call (ddp-leasebench), then OVERHEAD_PAIRS interleaved
# runs of a 2-node step with --standby auto and off (steps/s). Figures:
# docs/bench-standby.md.
#
#   BUILD_DIR=build bench/standby.sh
#   env: KILLS=10  SEED=1 (the kill steps)  FAILOVER=3 (--failover-timeout)  OVERHEAD_PAIRS=3
#        (0: skip)  LOGS=DIR (keep)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN=${BUILD_DIR:-build}/bin
[[ $BIN = /* ]] || BIN="$PWD/$BIN"
PY="${DDP_TORCH_PYTHON:-$("$ROOT/scripts/setup-deps.sh" --print-venv)/bin/python}"
[[ -x $BIN/ddp-trainer ]] || { echo "bench/standby.sh: $BIN/ddp-trainer not built" >&2; exit 1; }
WORK=${LOGS:-$(mktemp -d /tmp/ddp-bench-standby.XXXXXX)}
mkdir -p "$WORK"
[[ -n ${LOGS:-} ]] || trap 'rm -rf "$WORK"' EXIT
echo "bench/standby.sh: $(nproc) cores, $(uptime)"
# What fencing adds to every coordinator call (the epoch lease's check), before the jobs.
[[ -x $BIN/ddp-leasebench ]] && "$BIN/ddp-leasebench"
DDP_BIN_DIR="$BIN" DDP_E2E_CACHE="$WORK/cache" WORK="$WORK" "$PY" \
  "$ROOT/bench/standby/standby_bench.py"
