#!/usr/bin/env bash
# A straggler on the dashboard and in /metrics: a real coordinator with a short straggler window
# and simulated workers (ddp-loadgen) whose rank 5 is twice as slow in compute. Once the
# coordinator names it (ddpctl status --json), headless Chromium loads the dashboard; the dumped
# DOM must show rank 5's row flagged as a straggler with its cause, the straggler banner, the
# ETTR card, the time-use legend with each use's share, and the step breakdown by section.
# /metrics must score rank 5 and export ETTR and the time use; /api/history must carry the time
# use per sample. With DDP_SCREENSHOT=path it also saves a 1280x900 screenshot
# (docs/dashboard.png is made that way).
source "$(dirname "$0")/lib.sh"
chrome="$(command -v chromium || command -v chromium-browser || true)"
[[ -n "$chrome" ]] || { echo "SKIP: chromium not installed"; exit 77; }
world=8
slow=5
start_coordinator strag "$world" --straggler-window 3 --straggler-threshold 0.75
start_workers strag "$world" --steps-per-second 10 --epochs 3 --steps-per-epoch 400 \
  --batch-size 128 --slow-rank "$slow" --slow-section compute --slow-factor 2
wait_running

# The coordinator names the straggler within a few seconds (window 3 s).
named=""
for _ in $(seq 150); do
  named="$("$bin/ddpctl" --dist-file "$df" status --json 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)
print(" ".join("%d:%s" % (x["rank"], x["section"]) for x in s["stragglers"]))' || true)"
  [[ -n "$named" ]] && break
  sleep 0.1
done
[[ "$named" == "$slow:compute" ]] ||
  fail "the coordinator named '$named', not rank $slow (compute): $(tail -5 "$work/strag.coord.log")"
pass "the coordinator named rank $slow a straggler (compute)"
sleep "${DDP_DASHBOARD_WARMUP:-0}"  # a longer history for a screenshot

url="$("$bin/ddpctl" --dist-file "$df" dashboard)"
flags=(--headless --no-sandbox --disable-gpu --no-first-run --disable-dev-shm-usage
  --user-data-dir="$work/chrome-profile" --virtual-time-budget=5000)
timeout 60 "$chrome" "${flags[@]}" --dump-dom "$url" >"$work/dom.html" 2>"$work/chrome.log" ||
  fail "chromium failed: $(tail -5 "$work/chrome.log")"
python3 - "$work/dom.html" "$slow" <<'PY' || fail "dashboard DOM"
import html, re, sys
dom, slow = open(sys.argv[1]).read(), int(sys.argv[2])
def text(fragment):
    return html.unescape(re.sub(r"<[^>]*>", "", fragment))
rows = {int(r): (cls, cells) for cls, r, cells in
        re.findall(r'<tr class="([a-z -]*)" data-rank="(\d+)"[^>]*>(.*?)</tr>', dom)}
assert len(rows) == 8, ("rank rows", len(rows), dom[:3000])
cls, cells = rows[slow]
assert "flag-straggler" in cls.split(), ("slow rank's row", cls)
flag = text(re.findall(r'<td class="flag">(.*?)</td>', cells)[0])
assert re.fullmatch(r"straggler: compute \d+\.\dx slower than the best rank for \d+ s", flag), flag
score = text(re.findall(r'<td class="score">(.*?)</td>', cells)[0])
assert 0 < float(score) < 0.75, ("slow rank's score", score)
for r, (c, _) in rows.items():
    assert r == slow or "flag-straggler" not in c, ("only rank %d is a straggler" % slow, r, c)
# The banner names the straggler with its cause, in ddpctl's words.
m = re.search(r'<div id="stragglers"[^>]*>(.*?)</div></div>', dom)
assert m, "no straggler banner"
banner = text(m.group(1))
assert re.search(r"STRAGGLER: rank %d \(host [^)]+\): compute \d+\.\dx slower than the best "
                 r"rank for \d+ s \(relative score 0\.\d\d\)" % slow, banner), banner
# ETTR, as a percentage.
m = re.search(r'id="ettr">(\d+\.\d)%<', dom)
assert m and 0 < float(m.group(1)) <= 100, "no ETTR card percentage"
# The time-use legend: every use with its share of the wall time; training has some.
legend = {u: text(t) for u, t in re.findall(r'<li data-use="([a-z]+)">(.*?)</li>', dom)}
assert sorted(legend) == sorted(["training", "startup", "recoveries", "stalls", "checkpoints",
                                 "evaluation", "other"]), legend
m = re.match(r"training (\d+\.\d)% · ", legend["training"])
assert m and float(m.group(1)) > 0, legend["training"]
# The step breakdown: one bar segment and one legend entry per section, in seconds.
segments = re.findall(r'<div data-section="([a-z]+)" style="width:([\d.]+)%', dom)
assert [s for s, _ in segments] == ["data", "compute", "communication", "optimizer"], segments
assert abs(sum(float(w) for _, w in segments) - 100) < 0.5, segments
parts = {k: text(t) for k, t in re.findall(r'<li data-section="([a-z]+)">(.*?)</li>', dom)}
for k in ("data", "compute", "communication", "optimizer"):
    assert re.match(r"%s \d+\.\d{3}s \(\d+\.\d%%\)" % k, parts.get(k, "")), (k, parts)
note = text(re.search(r'id="breakdown-note">(.*?)</span>', dom).group(1))
assert note.endswith("(slowest rank %d)" % slow), note
PY
pass "dashboard: rank $slow flagged straggler (compute) in its row and the banner; ETTR, time use and step breakdown shown"

base="http://127.0.0.1:$(dist_value http_port)"
token="$(dist_value view_token)"
curl -s "$base/metrics?token=$token" >"$work/metrics.txt"
curl -s "$base/api/history?token=$token" >"$work/history.json"
python3 - "$work/metrics.txt" "$work/history.json" "$slow" <<'PY' || fail "/metrics or /api/history"
import json, re, sys
metrics, history, slow = open(sys.argv[1]).read(), json.load(open(sys.argv[2])), int(sys.argv[3])
def value(name):
    m = re.search(r"^%s (\S+)$" % re.escape(name), metrics, re.M)
    assert m, ("missing", name)
    return float(m.group(1))
assert value('ddp_rank_score{rank="%d",section="step"}' % slow) < 0.75
assert value('ddp_rank_score{rank="%d",section="compute"}' % slow) < 0.75
assert value('ddp_rank_score{rank="0",section="compute"}') > 0.75
assert value('ddp_rank_straggler{rank="%d"}' % slow) == 1
assert value("ddp_stragglers") == 1
assert 0 < value("ddp_ettr") <= 1
assert value('ddp_time_seconds{use="training"}') > 0
assert "# TYPE ddp_time_seconds counter" in metrics
assert value('ddp_step_section_seconds{section="compute"}') > 0
n = len(history["t"])
assert n > 0 and all(len(history["time_use"][u]) == n for u in
                     ("wall", "training", "startup", "recoveries", "stalls", "checkpoints",
                      "evaluation", "other")), history
PY
pass "/metrics scores rank $slow and exports ETTR and the time use; /api/history has the time use"

if [[ -n "${DDP_SCREENSHOT:-}" ]]; then
  timeout 60 "$chrome" "${flags[@]}" --hide-scrollbars --window-size=1280,900 \
    --screenshot="$DDP_SCREENSHOT" "$url" >/dev/null 2>&1 || fail "screenshot"
  pass "screenshot $DDP_SCREENSHOT"
fi
echo PASS
