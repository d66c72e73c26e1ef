#!/usr/bin/env bash
# Per-node control traffic for real: a local job of 4 workers (one task) heartbeats, registers
# and fetches its shards through its task's relay: the coordinator's /metrics counts NodeHeartbeat,
# NodeRegister and NodeGetShard calls and no per-worker Heartbeat, Register or GetShard, and every
# rank's own progress arrives, and the workers open no connection to the coordinator (at most the
# task's two: its relay's and its launcher's) (ddpctl status: 4 ranks, each done, each past half of the job's
# steps). With --heartbeats worker it is the other way round. The job must also end 0 either way. A bad
# --heartbeats value is a one-line usage error.
set -euo pipefail
bin="${DDP_BIN_DIR:?DDP_BIN_DIR is unset (run through ctest)}"
work="$(mktemp -d "${TMPDIR:-/tmp}/hb-relay-e2e.XXXXXX")"
pid=""
cleanup() {
  [[ -n "$pid" ]] && kill -9 "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [[ -f "$work/log" ]] && tail -20 "$work/log" >&2; exit 1; }

# count METRICS METHOD: the OK calls of METHOD in a /metrics text (0 when absent).
count() { sed -n "s/^ddp_rpc_requests_total{method=\"$2\",code=\"OK\"} \([0-9]*\)$/\1/p" <<<"$1" | head -1 | grep . || echo 0; }

run() {
  local mode="$1" df="$work/df.$1"
  "$bin/ddp-trainer" --nprocs-per-node 4 --data synthetic:8000 --arch mlp --epochs 2 \
    --batch-size 16 --no-eval --print-freq 1000 --linger 60 --heartbeats "$mode" \
    --dist-file "$df" >"$work/log" 2>&1 &
  pid=$!
  local deadline=$((SECONDS + 120)) gport="" n
  max_conns=0
  until grep -q "job SUCCEEDED" "$df.coordinator.log" 2>/dev/null; do
    ((SECONDS < deadline)) || fail "$mode: the job did not succeed within 120 s"
    kill -0 "$pid" 2>/dev/null || fail "$mode: the job ended early"
    # The most connections to the coordinator's gRPC port seen at once while the job runs.
    [[ -z "$gport" && -s "$df" ]] && gport="$(sed -n 's/^grpc_address=.*:\([0-9]*\)$/\1/p' "$df")"
    if [[ -n "$gport" ]]; then
      n="$(ss -Htn state established "( dport = :$gport )" | wc -l)"
      ((n > max_conns)) && max_conns=$n
    fi
    sleep 0.2
  done
  local port token
  port="$(sed -n 's/^http_port=//p' "$df")"
  token="$(sed -n 's/^view_token=//p' "$df")"
  metrics="$(curl -sf -H "Authorization: Bearer $token" "http://127.0.0.1:$port/metrics")" ||
    fail "$mode: no /metrics"
  status="$("$bin/ddpctl" status --json --dist-file "$df")" || fail "$mode: ddpctl status"
  # Once the workers have exited (only the coordinator is left), a signal ends the linger.
  until [[ "$(pgrep -P "$pid" | wc -l)" -le 1 ]]; do
    ((SECONDS < deadline)) || fail "$mode: the workers did not exit"
    sleep 0.2
  done
  kill -TERM "$pid"
  local rc=0
  wait "$pid" || rc=$?
  pid=""
  [[ $rc == 0 ]] || fail "$mode: the job exited $rc"
}

check_ranks() {
  python3 - "$1" <<'PY' || fail "$2: status: $1"
import json, sys
s = json.loads(sys.argv[1])
assert s["state"] == "SUCCEEDED", s["state"]
ranks = s["ranks"]
assert len(ranks) == 4, ranks
total = s["epochs"] * s["steps_per_epoch"]
for r in ranks:
    # Each rank's own progress arrived (its last heartbeat, up to an interval before the end).
    assert r["state"] == "done" and total // 2 < r["step"] <= total, (r, total)
PY
}

# A value that is neither: a one-line usage error (exit 2), nothing started.
rc=0
"$bin/ddp-trainer" --nprocs-per-node 2 --data synthetic:64 --heartbeats sometimes \
  --dist-file "$work/df.bad" >"$work/bad.out" 2>&1 || rc=$?
eval "$("$bin/ddpctl" exit-codes)"
[[ $rc == "$DDP_EXIT_USAGE" ]] || fail "--heartbeats sometimes exited $rc: $(cat "$work/bad.out")"
[[ "$(wc -l <"$work/bad.out")" == 1 ]] && grep -q -- "--heartbeats" "$work/bad.out" ||
  fail "--heartbeats sometimes: not one line naming the flag: $(cat "$work/bad.out")"
[[ ! -e "$work/df.bad" ]] || fail "--heartbeats sometimes started a job"

run node
node_calls="$(count "$metrics" NodeHeartbeat)"
worker_calls="$(count "$metrics" Heartbeat)"
echo "node: NodeHeartbeat $node_calls, Heartbeat $worker_calls"
((node_calls >= 2)) || fail "node: $node_calls NodeHeartbeat calls"
((worker_calls == 0)) || fail "node: $worker_calls per-worker Heartbeat calls"
# The workers open no connection: the task's relay and its launcher's own are all there is.
echo "node: at most $max_conns connections to the coordinator"
((max_conns >= 1 && max_conns <= 2)) || fail "node: $max_conns connections to the coordinator"
for m in Register GetShard; do
  n="$(count "$metrics" "Node$m")" w="$(count "$metrics" "$m")"
  echo "node: Node$m $n, $m $w"
  # 4 workers: one node call each when they ask together, at most one per worker.
  ((n >= 1 && n <= 4 * 2)) || fail "node: $n Node$m calls"
  ((w == 0)) || fail "node: $w per-worker $m calls"
done
check_ranks "$status" node

run worker
node_calls="$(count "$metrics" NodeHeartbeat)"
worker_calls="$(count "$metrics" Heartbeat)"
echo "worker: NodeHeartbeat $node_calls, Heartbeat $worker_calls"
((node_calls == 0)) || fail "worker: $node_calls NodeHeartbeat calls"
((worker_calls >= 8)) || fail "worker: $worker_calls per-worker Heartbeat calls"
echo "worker: at most $max_conns connections to the coordinator"
((max_conns >= 4)) || fail "worker: $max_conns connections to the coordinator (4 workers)"
for m in Register GetShard; do
  n="$(count "$metrics" "Node$m")" w="$(count "$metrics" "$m")"
  echo "worker: Node$m $n, $m $w"
  ((n == 0 && w >= 4)) || fail "worker: Node$m $n, $m $w"
done
check_ranks "$status" worker
echo "ok: heartbeats, registrations and shards relayed per node, and per worker when asked"
