#!/usr/bin/env bash
# The coordinator's HTTP endpoint: token required everywhere but /healthz (401 without, 200 with
# the Bearer header or ?token=), /api/status is the `ddpctl status --json` object, /metrics is
# Prometheus text with the job, rank and RPC series, /api/history feeds the charts.
source "$(dirname "$0")/lib.sh"
start_coordinator http 8
start_workers http 8 --steps-per-second 10 --epochs 100
wait_running
sleep 2
port="$(dist_value http_port)"
token="$(dist_value view_token)"
[[ "$port" -gt 0 ]] || fail "dist_file has no real http port: $port"
base="http://127.0.0.1:$port"
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
for path in / /api/status /api/history /metrics; do
  [[ "$(code "$base$path")" == 401 ]] || fail "$path without token"
  [[ "$(code -H "Authorization: Bearer nope" "$base$path")" == 401 ]] || fail "$path wrong token"
  [[ "$(code "$base$path?token=nope")" == 401 ]] || fail "$path wrong ?token"
  [[ "$(code -H "Authorization: Bearer $token" "$base$path")" == 200 ]] || fail "$path header"
  [[ "$(code "$base$path?token=$token")" == 200 ]] || fail "$path ?token"
done
[[ "$(curl -s "$base/healthz")" == ok ]] || fail "/healthz"
[[ "$(code "$base/nope?token=$token")" == 404 ]] || fail "unknown path"
pass "auth: 401 without/wrong token, 200 with header or ?token=, /healthz open"

api="$(curl -s -H "Authorization: Bearer $token" "$base/api/status")"
ctl="$("$bin/ddpctl" --dist-file "$df" status --json)"
python3 - "$api" "$ctl" <<'PY' || fail "/api/status differs from ddpctl status --json"
import json, sys
a, c = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert list(a.keys()) == list(c.keys()), (list(a.keys()), list(c.keys()))
assert list(a["ranks"][0].keys()) == list(c["ranks"][0].keys())
for k in ["job_id", "state", "world_size", "registered", "epochs", "steps_per_epoch", "generation"]:
    assert a[k] == c[k], k
assert a["state"] == "RUNNING" and len(a["ranks"]) == 8
PY
pass "/api/status is the ddpctl status --json object"

metrics="$(curl -s "$base/metrics?token=$token")"
for series in 'ddp_job_state{state="RUNNING"} 1' 'ddp_registered_ranks 8' 'ddp_lost_ranks 0' \
  'ddp_step ' 'ddp_loss ' 'ddp_samples_per_second ' 'ddp_rank_step{rank="7",host="node1"}' \
  'ddp_rank_last_seen_seconds{rank="0"' 'ddp_rpc_requests_total{method="Heartbeat",code="OK"}' \
  'ddp_rpc_duration_seconds_bucket{method="Heartbeat",le="+Inf"}' \
  'ddp_rpc_duration_seconds_count{method="Register"} 8' '# TYPE ddp_rpc_duration_seconds histogram'; do
  grep -qF "$series" <<<"$metrics" || fail "/metrics lacks: $series"
done
history="$(curl -s "$base/api/history?token=$token")"
python3 - "$history" <<'PY' || fail "/api/history"
import json, sys
h = json.loads(sys.argv[1])
assert len(h["t"]) >= 1 and len(h["t"]) == len(h["loss"]) == len(h["samples_per_second"]), h
PY
pass "/metrics series and /api/history"
echo PASS
