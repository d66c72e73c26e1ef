#!/usr/bin/env bash
# Status read latency under load: the real ddp-coordinator (its own process, as in production),
# N simulated workers heartbeating at 1 Hz from a second process (ddp-loadgen --dist-file), and
# ddp-statusbench timing sequential GetStatus RPCs, GET /api/status and GET /metrics
# (--seconds each, 20 ms apart). Bounded: about 3 x SECONDS + rendezvous.
#   bench/status.sh [N] [SECONDS]      (default: 4096 10)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${DDP_BIN_DIR:-$root/${BUILD_DIR:-build}/bin}"   # BUILD_DIR: relative to the source root
[[ -x "$bin/ddp-statusbench" ]] || { echo "status.sh: build ddp-statusbench first" >&2; exit 1; }
n="${1:-4096}"
seconds="${2:-10}"
work="$(mktemp -d "${TMPDIR:-/tmp}/ddp-status-bench.XXXXXX")"
pids=()
cleanup() {
  local p
  # SIGKILL: on SIGTERM the coordinator would stop gracefully and wait for the (gone) simulated
  # workers until the heartbeat timeout.
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true  # one descriptor per worker connection
df="$work/dist_file"
"$bin/ddp-coordinator" --world-size "$n" --job-id status-bench --dist-file "$df" \
  --listen 127.0.0.1:0 --http-port 0 --heartbeat-timeout 60 --registration-timeout 120 \
  >"$work/coordinator.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [[ -s "$df" ]] && break; sleep 0.1; done
"$bin/ddp-loadgen" --dist-file "$df" --workers "$n" --steps-per-second 2 --epochs 1000 \
  >"$work/loadgen.log" 2>&1 &
pids+=($!)
for _ in $(seq 1200); do grep -q heartbeating "$work/loadgen.log" && break; sleep 0.1; done
grep -q heartbeating "$work/loadgen.log" || { cat "$work/loadgen.log" >&2; exit 1; }
sleep 3  # one full heartbeat round at steady state
echo "workers=$n (separate process), coordinator $("$bin/ddpctl" --dist-file "$df" dist-file --field grpc_address), $(nproc) cpus"
sed -n 's/^loadgen: //p' "$work/loadgen.log"
"$bin/ddp-statusbench" --dist-file "$df" --seconds "$seconds"
