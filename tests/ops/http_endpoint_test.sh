#!/usr/bin/env bash
# The coordinator's HTTP endpoint: token required everywhere but /healthz (401 without, 200 with
# the Bearer header or ?token=), /api/status is the `ddpctl status --json` object, /metrics is
# Prometheus text with the job, rank and RPC series, /api/history feeds the charts. Tokens by
# role: the view and control tokens open every page, the worker token none. GET only: another
# method gets 405, a request announcing a body 413 (or 401 without a token), answered from the
# head without waiting for the body. Hostile clients (slowloris: many sockets sending a head a
# byte at a time; too many connections from one host; oversized heads) are refused within the
# server's limits (libmicrohttpd's options) while /api/status keeps answering.
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

[[ "$(code -X POST "$base/api/status?token=$token")" == 405 ]] || fail "POST not refused"
[[ "$(code -X POST -d x "$base/api/status")" == 401 ]] || fail "POST without a token"
python3 - "$port" "$token" <<'PY' || fail "bodies"
import socket, sys, time
port, token = int(sys.argv[1]), sys.argv[2]
# The head announces 1 MB and the body never comes: the answer proves nobody waits for it.
for target, want in [("/api/status?token=" + token, b" 413 "), ("/api/status", b" 401 ")]:
    t = time.time()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n" % target.encode())
    s.settimeout(3.0)
    got = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        got += chunk
    assert want in got.split(b"\r\n")[0], got
    assert time.time() - t < 1.0, time.time() - t
PY
pass "methods and bodies: POST 405 (401 without a token), a body 413 from its head alone"

python3 - "$port" "$token" <<'PY' || fail "hostile HTTP clients"
import json, socket, sys, time, urllib.error, urllib.request
port, token = int(sys.argv[1]), sys.argv[2]
def status_seconds():
    t = time.time()
    url = "http://127.0.0.1:%d/api/status?token=%s" % (port, token)
    with urllib.request.urlopen(url, timeout=5) as r:
        assert r.status == 200 and json.loads(r.read())["state"] == "RUNNING"
    return time.time() - t
def closed(s, wait=0.0):
    """True when the server has closed `s` (EOF or reset) without answering, within `wait`."""
    s.settimeout(wait)
    try:
        got = s.recv(4096)
        assert got == b"", got
        return True
    except (socket.timeout, BlockingIOError):
        return False
    except ConnectionResetError:
        return True
def answer(s, wait):
    s.settimeout(wait)
    try:
        return s.recv(4096)
    except (socket.timeout, OSError) as e:
        return str(e).encode()
# Slowloris from another host (127.0.0.2): 200 sockets; beyond 64 per host each is closed at
# once, unanswered; the rest dribble a head a byte at a time, then stall and are closed after the
# 5 s idle timeout.
t0 = time.time()
slow = []
for _ in range(200):
    s = socket.socket()
    s.bind(("127.0.0.2", 0))
    s.connect(("127.0.0.1", port))
    slow.append(s)
time.sleep(0.5)
full = [s for s in slow if closed(s)]
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
stalled = time.time()
timed_out = sum(1 for s in slow if closed(s, max(0.1, stalled + 8.0 - time.time())))
assert timed_out == len(slow), (timed_out, len(slow))
waited = time.time() - stalled
assert 4.0 <= waited < 8.0, waited
# Oversized heads (over the 16 KiB per connection): a 20 KiB header, and 2000 header lines.
for extra in [b"X-Big: " + b"a" * 20000 + b"\r\n", b"".join(b"X-%d: 1\r\n" % i for i in range(2000))]:
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /api/status HTTP/1.1\r\nHost: x\r\n" + extra + b"\r\n")
    got = answer(s, 3.0)
    assert b" 431 " in got, got
print("slowloris: %d closed at once (per-host cap), %d closed after %.1f s stalled; /api/status "
      "at worst %.3f s; oversized heads 431" % (len(full), len(slow), waited, worst))
PY
pass "hostile clients: per-host cap, stalled heads closed, big heads (431); status answers"
metrics="$(curl -s "$base/metrics?token=$token")"
grep -Eq '^ddp_http_requests_total\{path="other",code="other"\} [1-9]' <<<"$metrics" ||
  fail "refusals not counted in /metrics: $(grep http_requests <<<"$metrics")"
echo PASS
