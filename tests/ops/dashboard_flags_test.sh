#!/usr/bin/env bash
# Status as data: the screens show what the status JSON says and decide nothing themselves. A
# crafted status JSON has every rank state, every flag (and none) and both final values, several
# of them against what the rules would decide (a training rank flagged lost and final, a failed
# rank unflagged and not final, a rank behind by 42 at the median step, a FAILED job that exits
# 3), a straggler named for its data section (the JSON's cause, though its scores would say
# otherwise), the step breakdown and where the time went. Headless Chromium loads the embedded dashboard page (dashboard_page_dump) from a small
# server that answers /api/status with that JSON, and `ddpctl status --from` reads the same file;
# both must show each rank's flag and finality, the job's exit code, the straggler with its cause
# and ETTR as the JSON has them, and the coordinator (epoch, node, host, takeovers) and its
# standby; the dashboard also the time use and the step breakdown.
# usage: dashboard_flags_test.sh DASHBOARD_PAGE_DUMP
source "$(dirname "$0")/lib.sh"
page_dump="${1:?usage: dashboard_flags_test.sh DASHBOARD_PAGE_DUMP}"
chrome="$(command -v chromium || command -v chromium-browser || true)"
[[ -n "$chrome" ]] || { echo "SKIP: chromium not installed"; exit 77; }

"$page_dump" >"$work/index.html"
python3 - "$work/status.json" <<'PY'
import json, sys
def rank(i, state, flag, final, **kw):
    r = {"rank": i, "host": "node%d" % (i // 4), "node_rank": i // 4, "local_rank": i % 4,
         "pid": 100 + i, "state": state, "epoch": 1, "step": 500, "loss": 0.5,
         "samples_per_second": 10, "last_seen_seconds": 0.1, "phase": "forward",
         "phase_seconds": 0.2, "flag": flag, "behind_by": 0, "final": final}
    r.update(kw)
    return r
ranks = [
    rank(0, "training", "lost", True),           # rules: no flag, not final
    rank(1, "failed", None, False),              # rules: flag failed, final
    rank(2, "lost", "lost", True),
    rank(3, "stalled", "stalled", False, phase="data", phase_seconds=61),
    rank(4, "training", "silent", False),        # heard from 0.1 s ago: rules say not silent
    rank(5, "training", "behind", False, behind_by=42),  # at the median step
    rank(6, "done", None, True),
    rank(7, "stopped", None, False),             # rules: final
    rank(8, "evaluating", "failed", False),      # rules: no flag
    rank(9, "checkpointing", None, False),
    rank(10, "finished", None, True),            # rules: not final
    rank(11, "starting", "behind", False, behind_by=3, last_seen_seconds=5.5),
    rank(12, "registered", None, False),
    rank(13, "training", "straggler", False,
         score={"relative": 0.4, "individual": 0.9, "data": 0.9, "compute": 0.5,
                "communication": 1, "optimizer": 1, "straggler": True}),
]
status = {"job_id": "crafted", "state": "FAILED", "finished": True, "generation": 0,
          "world_size": len(ranks), "registered": len(ranks), "num_nodes": 4, "epoch": 1,
          "epochs": 2, "step": 500, "steps_per_epoch": 1000, "loss": 0.5,
          "samples_per_second": 130, "eta_seconds": None, "uptime_seconds": 60,
          "failed_rank": 1, "failure_reason": "rank 1 failed",
          "failure": {"rank": 1, "cause": "worker_error", "text": "rank 1 failed"},
          "stop_reason": "", "checkpoint": None, "ranks": ranks, "events": ["+1.0s started"],
          "restarts": 0, "max_restarts": 0, "last_recovery_seconds": None,
          "membership_generation": 0, "lost_ranks": [], "spare_nodes": 0,
          "exit_code": 3,                      # rules: a FAILED job exits 1
          "stragglers": [{"rank": 13, "host": "node3", "node": 3, "section": "data",
                          "relative_score": 0.4, "slower": 3.0, "since": 18, "seconds": 42}],
          "breakdown": {"rank": 13, "step_seconds": 0.5, "data": 0.3, "compute": 0.15,
                        "communication": 0.03, "optimizer": 0.02,
                        "spread": {"data": 0.2, "compute": 0.01, "communication": 0.2,
                                   "optimizer": 0}},
          "coordinator": {"epoch": 2, "node": 3, "host": "node3", "takeovers": 2,
                          "standby": {"node": 0, "host": "node0", "behind_records": 5}},
          "ettr": 0.75,
          "time_use": {"wall": 60, "training": 45, "startup": 6, "recoveries": 3, "stalls": 4,
                       "checkpoints": 2, "evaluation": 0, "other": 0}}
json.dump(status, open(sys.argv[1], "w"))
PY

# The page and the crafted JSON, as the coordinator's HTTP endpoint would serve them.
python3 - "$work" >"$work/server.log" 2>&1 <<'PY' &
import http.server, os, sys
work = sys.argv[1]
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        path = self.path.split("?")[0]
        body, kind = {
            "/": ("index.html", "text/html; charset=utf-8"),
            "/api/status": ("status.json", "application/json"),
        }.get(path, (None, None))
        data = open(os.path.join(work, body), "rb").read() if body else \
            b'{"t":[],"loss":[],"samples_per_second":[]}'
        self.send_response(200)
        self.send_header("Content-Type", kind or "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
open(os.path.join(work, "port"), "w").write(str(server.server_port))
server.serve_forever()
PY
pids+=($!)
for _ in $(seq 100); do [[ -s "$work/port" ]] && break; sleep 0.1; done
[[ -s "$work/port" ]] || fail "the page server did not start: $(cat "$work/server.log")"
url="http://127.0.0.1:$(cat "$work/port")/?token=t"

flags=(--headless --no-sandbox --disable-gpu --no-first-run --disable-dev-shm-usage
  --user-data-dir="$work/chrome-profile" --virtual-time-budget=5000)
timeout 60 "$chrome" "${flags[@]}" --dump-dom "$url" >"$work/dom.html" 2>"$work/chrome.log" ||
  fail "chromium failed: $(tail -5 "$work/chrome.log")"
"$bin/ddpctl" status --from "$work/status.json" --all >"$work/status.txt" ||
  fail "ddpctl status --from failed: $(cat "$work/status.txt")"

python3 - "$work/status.json" "$work/dom.html" "$work/status.txt" <<'PY' || fail "a screen disagrees with the JSON"
import html, json, re, sys
status = json.load(open(sys.argv[1]))
dom = open(sys.argv[2]).read()
text = open(sys.argv[3]).read()

def note(r, dashboard):  # the words the screens use for a rank's flag
    parts = []
    if r["flag"] == "straggler":  # ddpctl: its score; the dashboard: the straggler's cause
        parts.append("straggler: data 3.0x slower than the best rank for 42 s" if dashboard
                     else "straggler (score %.2f)" % r["score"]["relative"])
    if r["flag"] == "stalled":
        parts.append("in %s %.1fs" % (r["phase"], r["phase_seconds"]))
    if r["behind_by"] > 0:
        parts.append("behind by %d" % r["behind_by"])
    if r["flag"] == "silent":
        parts.append("silent %.1fs" % r["last_seen_seconds"])
    if r["flag"] and not parts:
        parts.append(r["flag"])
    return ", ".join(parts)

# The dashboard: one row per rank, flagged ones first, each with the JSON's flag and finality.
rows = re.findall(r'<tr class="([a-z -]*)" data-rank="(\d+)" data-flag="([a-z]*)">(.*?)</tr>', dom)
assert len(rows) == len(status["ranks"]), ("rows", len(rows), dom[:3000])
by_rank = {r["rank"]: r for r in status["ranks"]}
seen_unflagged = False
for cls, rank, flag, cells in rows:
    r = by_rank[int(rank)]
    tds = [html.unescape(re.sub(r"<[^>]*>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", cells)]
    classes = set(cls.split())
    assert flag == (r["flag"] or ""), (rank, flag, r["flag"])
    assert ("flag-" + r["flag"] in classes) if r["flag"] else not any(c.startswith("flag-") for c in classes), (rank, cls)
    assert ("final" in classes) == r["final"], (rank, cls, r["final"])
    assert tds[3] == r["state"] + (" \u2713" if r["final"] else ""), (rank, tds[3])
    assert tds[-1] == note(r, True), (rank, tds[-1], note(r, True))
    seen_unflagged |= not r["flag"]
    assert not (seen_unflagged and r["flag"]), ("flagged rank after an unflagged one", rank)
working = sum(1 for r in status["ranks"] if not r["final"])
assert re.search(r'id="ranks">%d/%d<' % (working, status["world_size"]), dom), "ranks card"
assert "exit code %d" % status["exit_code"] in dom, "exit code in the header"
flagged = sum(1 for r in status["ranks"] if r["flag"])
assert "%d flagged" % flagged in dom, "flagged count"
def text_of(fragment):
    return html.unescape(re.sub(r"<[^>]*>", "", fragment))
straggler = ("STRAGGLER: rank 13 (host node3): data 3.0x slower than the best rank for 42 s "
             "(relative score 0.40)")
banner = re.search(r'<div id="stragglers"[^>]*>(.*?)</div></div>', dom)
assert banner and text_of(banner.group(1)) == straggler, ("straggler banner", banner)
assert 'id="ettr">75.0%<' in dom, "ETTR card"
legend = dict(re.findall(r'<li data-use="([a-z]+)">(.*?)</li>', dom))
assert text_of(legend["training"]) == "training 75.0% \u00b7 45s", legend
assert text_of(legend["stalls"]) == "stalls 6.7% \u00b7 4s", legend
assert text_of(legend["evaluation"]) == "evaluation 0.0% \u00b7 0s", legend
sections = dict(re.findall(r'<li data-section="([a-z]+)">(.*?)</li>', dom))
assert text_of(sections["data"]) == "data 0.300s (60.0%) \u00b7 spread 0.200s", sections
assert text_of(sections["optimizer"]) == "optimizer 0.020s (4.0%) \u00b7 spread 0.000s", sections
assert re.search(r'<div data-section="compute" style="width:30.00%', dom), "compute bar"
assert 'id="breakdown-note">step 0.500s (slowest rank 13)<' in dom, "breakdown note"
coord = re.search(r'<span class="dim" id="coord">(.*?)</span>', dom)
assert coord and text_of(coord.group(1)) == ("coordinator epoch 2 on node3 (node 3) \u00b7 2 "
    "takeovers \u00b7 standby node 0 (node0), 5 records behind"), ("coordinator", coord)

# ddpctl status --from: the same decisions, in its own words.
assert "FAILED (finished, exit %d)" % status["exit_code"] in text, text
assert straggler + "\n" in text, text
assert "ETTR 75.0% of 1m00s" in text, text
assert ("coordinator: epoch 2 on host node3 (node 3), 2 takeovers; standby: node 0 (host node0), "
        "5 records behind\n") in text, text
finals = sum(1 for r in status["ranks"] if r["final"])
assert "; %d flagged; %d final\n" % (flagged, finals) in text, text
lines = [l for l in text.splitlines() if re.match(r"^\d+ +node", l)]
assert len(lines) == len(status["ranks"]), text
for i, line in enumerate(lines):
    r = by_rank[int(line.split()[0])]
    want = note(r, False)
    assert line.endswith("<< " + want) if want else "<<" not in line, (line, want)
    assert line.split()[5] == r["state"], line
    if i > 0 and r["flag"]:
        assert by_rank[int(lines[i - 1].split()[0])]["flag"], ("flagged first", text)
PY
pass "dashboard and ddpctl status show every flag, finality and the exit code as the JSON says"
echo PASS
