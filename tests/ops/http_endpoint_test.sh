#!/usr/bin/env bash
# The coordinator's HTTP endpoint: token required everywhere but /healthz (401 without, 200 with
# the Bearer header or ?token=), /api/status is the `ddpctl status --json` object, /metrics is
# Prometheus text with the job, rank and RPC series, /api/history feeds the charts. Tokens by
# role: the view and control tokens open every page, the worker token none. Hostile clients
# (slowloris: many sockets sending a head a byte at a time; too many connections from one host;
# oversized heads) are refused within the limits while /api/status keeps answering.
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
[[ "$(code -H "Authorization: Bearer $(dist_value token)" "$base/api/status")" == 401 ]] ||
  fail "the worker token opened /api/status"
[[ "$(code "$base/metrics?token=$(dist_value control_token)")" == 200 ]] || fail "control token"
[[ "$(curl -s "$base/healthz")" == ok ]] || fail "/healthz"
[[ "$(code "$base/nope?token=$token")" == 404 ]] || fail "unknown path"
pass "auth: 401 without/wrong/worker token, 200 with a view or control token, /healthz open"

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

python3 - "$port" "$token" <<'PY' || fail "hostile HTTP clients"
import json, socket, sys, time, urllib.error, urllib.request
port, token = int(sys.argv[1]), sys.argv[2]
def status_seconds():
    t = time.time()
    url = "http://127.0.0.1:%d/api/status?token=%s" % (port, token)
    with urllib.request.urlopen(url, timeout=5) as r:
        assert r.status == 200 and json.loads(r.read())["state"] == "RUNNING"
    return time.time() - t
def answer(s, wait=0.0):
    s.settimeout(wait)
    try:
        return s.recv(4096)
    except (socket.timeout, BlockingIOError):
        return b""
    except OSError as e:
        return str(e).encode()
# Slowloris from another host (127.0.0.2): 200 sockets; beyond 64 per host each is answered
# 503 at once; the rest dribble a head a byte at a time and get 408 after 5 s.
t0 = time.time()
slow = []
for _ in range(200):
    s = socket.socket()
    s.bind(("127.0.0.2", 0))
    s.connect(("127.0.0.1", port))
    slow.append(s)
time.sleep(0.5)
full = [s for s in slow if b" 503 " in answer(s, 0.0)]
slow = [s for s in slow if s not in full]
assert len(full) >= 200 - 64 and len(slow) >= 32, (len(full), len(slow))
head = b"GET /api/status HTTP/1.1\r\nHost: x\r\nX-Slow: "
worst = 0.0
for k in range(12):
    for s in slow:
        s.send(head[k:k + 1])
    worst = max(worst, status_seconds())
    time.sleep(0.25)
assert worst < 1.0, "/api/status took %.2f s under slowloris" % worst
time.sleep(max(0.0, t0 + 6.5 - time.time()))
timed_out = sum(1 for s in slow if b" 408 " in answer(s, 1.0))
assert timed_out == len(slow), (timed_out, len(slow))
# Oversized heads: a 20 KiB header, and 100 header lines.
for extra in [b"X-Big: " + b"a" * 20000 + b"\r\n", b"".join(b"X-%d: 1\r\n" % i for i in range(100))]:
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /api/status HTTP/1.1\r\nHost: x\r\n" + extra + b"\r\n")
    got = answer(s, 3.0)
    assert b" 431 " in got, got
print("slowloris: %d refused at once (per-host cap), %d timed out (408); /api/status at worst "
      "%.3f s; oversized heads 431" % (len(full), len(slow), worst))
PY
pass "hostile clients: per-host cap (503), slow heads (408), big heads (431); status answers"
metrics="$(curl -s "$base/metrics?token=$token")"
grep -Eq '^ddp_http_requests_total\{path="other",code="other"\} [1-9]' <<<"$metrics" ||
  fail "refusals not counted in /metrics: $(grep http_requests <<<"$metrics")"
echo PASS
