#!/usr/bin/env bash
# Shared helpers for the operator-surface tests: a real ddp-coordinator plus simulated workers
# (ddp-loadgen in external mode), each test in its own temp folder. Source it; needs $DDP_BIN_DIR.
set -euo pipefail
bin="${DDP_BIN_DIR:?DDP_BIN_DIR is unset (run through ctest)}"
# The shared shell library (ddp_dist_field, DDP_EXIT_* through ddpctl).
# shellcheck source=../../slurm/lib/ddp.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../slurm/lib/ddp.sh"
ddp_load_exit_codes
work="$(mktemp -d "${TMPDIR:-/tmp}/ddp-ops.XXXXXX")"
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }

# start_coordinator NAME WORLD [extra flags...]: sets coord_pid and df (the dist_file).
start_coordinator() {
  local name="$1" world="$2"
  shift 2
  df="$work/dist_file.$name"
  "$bin/ddp-coordinator" --world-size "$world" --job-id "$name" --dist-file "$df" \
    --listen 127.0.0.1:0 --linger "${LINGER:-1}" --heartbeat-timeout 5 "$@" >"$work/$name.coord.log" 2>&1 &
  coord_pid=$!
  pids+=("$coord_pid")
  local i
  for i in $(seq 100); do [[ -s "$df" ]] && return 0; sleep 0.1; done
  fail "coordinator $name did not publish $df: $(cat "$work/$name.coord.log")"
}

# start_workers NAME WORLD [loadgen flags...]: sets workers_pid.
start_workers() {
  local name="$1" world="$2"
  shift 2
  "$bin/ddp-loadgen" --dist-file "$df" --workers "$world" --per-node 4 "$@" \
    >"$work/$name.workers.log" 2>&1 &
  workers_pid=$!
  pids+=("$workers_pid")
}

# wait_running: until ddpctl status says RUNNING (10 s).
wait_running() {
  local i
  for i in $(seq 100); do
    "$bin/ddpctl" --dist-file "$df" status --json 2>/dev/null | grep -q '"state":"RUNNING"' && return 0
    sleep 0.1
  done
  fail "job never RUNNING"
}

# dist_value FIELD: a field of the current dist_file, read (and checked) by ddpctl.
dist_value() { ddp_dist_field "$df" "$1"; }
