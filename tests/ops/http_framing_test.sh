#!/usr/bin/env bash
# The coordinator's HTTP endpoint decides from the head alone, with real sockets: a POST that
# announces a large body, to an unknown route or without a token, is answered 404 / 401 at once
# and closed, its body never waited for (nor a 100 Continue sent); slow unauthenticated clients
# (16 connections trickling a head at one byte a second, past the idle timeout) hold no HTTP
# thread: an authenticated /api/status is answered promptly throughout.
source "$(dirname "$0")/lib.sh"
start_coordinator framing 2 # no workers: the endpoint serves while the job registers
port="$(dist_value http_port)"
token="$(dist_value view_token)"
[[ "$port" -gt 0 ]] || fail "dist_file has no http port: $port"

python3 - "$port" "$token" <<'PY' || fail "bodies announced to refused routes"
import socket, sys, time
port, token = int(sys.argv[1]), sys.argv[2]
def ask(head):
    """Sends `head` only (its body never comes); returns (answer, seconds, closed)."""
    t = time.time()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(head)
    s.settimeout(3.0)
    got, closed = b"", False
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                closed = True
                break
            got += chunk
    except socket.timeout:
        pass
    except ConnectionResetError:
        closed = True
    return got, time.time() - t, closed
big = b"Content-Length: 1000000000\r\n"
cases = [
    (b"POST /nope HTTP/1.1\r\nHost: x\r\n" + big + b"\r\n", b"404"),
    (b"POST /nope HTTP/1.1\r\nHost: x\r\n" + big + b"Expect: 100-continue\r\n\r\n", b"404"),
    (b"POST /nope?token=%s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (token.encode(), big), b"404"),
    (b"POST /api/status HTTP/1.1\r\nHost: x\r\n" + big + b"\r\n", b"401"),
    (b"POST /api/status HTTP/1.1\r\nHost: x\r\n" + big + b"Expect: 100-continue\r\n\r\n", b"401"),
    (b"POST /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\n" + big + b"\r\n", b"401"),
    (b"POST /api/status HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", b"401"),
    (b"POST /api/status?token=%s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (token.encode(), big), b"405"),
]
for head, want in cases:
    got, took, closed = ask(head)
    status = got.split(b"\r\n", 1)[0]
    assert status.startswith(b"HTTP/1.1 " + want), (head, got[:200])
    assert b"100 Continue" not in got, (head, got[:200])
    assert closed, ("the connection stayed open, waiting for the body", head)
    assert took < 1.0, ("answered after %.2f s" % took, head)
print("%d refusals from the head, each answered and closed at once" % len(cases))
PY
pass "a POST announcing 1 GB: unknown route 404, no or bad token 401, answered at once, closed"

python3 - "$port" "$token" <<'PY' || fail "slowloris"
import json, socket, sys, time, urllib.request
port, token = int(sys.argv[1]), sys.argv[2]
def status_seconds():
    t = time.time()
    req = urllib.request.Request("http://127.0.0.1:%d/api/status" % port,
                                 headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(req, timeout=5) as r:
        assert r.status == 200 and json.loads(r.read())["job_id"] == "framing"
    return time.time() - t
slow = []
for i in range(16):
    s = socket.socket()
    s.bind(("127.0.0.%d" % (2 + i % 4), 0))  # from four other hosts
    s.connect(("127.0.0.1", port))
    slow.append(s)
head = b"GET /api/status HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 64
worst, asked = 0.0, 0
start = time.time()
k = 0
while time.time() - start < 9.0:  # past the 5 s idle timeout: a trickle is progress
    for s in slow:
        s.send(head[k:k + 1])
    k += 1
    tick = time.time()
    while time.time() - tick < 1.0:
        worst = max(worst, status_seconds())
        asked += 1
        time.sleep(0.2)
assert worst < 0.5, "/api/status took %.2f s during the attack" % worst
open_ = 0
for s in slow:
    s.settimeout(0.01)
    try:
        if s.recv(1) != b"":
            open_ += 1
    except socket.timeout:
        open_ += 1  # nothing to read: still open, still trickling
    except ConnectionResetError:
        pass
print("16 slow heads for %.0f s (%d still open): %d authenticated /api/status, worst %.3f s"
      % (time.time() - start, open_, asked, worst))
PY
pass "slowloris (16 connections, a byte a second): /api/status answered promptly throughout"
echo PASS
