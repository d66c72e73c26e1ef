#!/usr/bin/env bash
# Headless Chromium loads the dashboard with the token; the page's script must have filled in
# the current step and one table row per rank in the dumped DOM. With DDP_SCREENSHOT=path it
# also saves a 1280x900 screenshot (docs/dashboard.png is made that way by
# dashboard_straggler_test.sh, whose job has a straggler to show).
source "$(dirname "$0")/lib.sh"
chrome="$(command -v chromium || command -v chromium-browser || true)"
[[ -n "$chrome" ]] || { echo "SKIP: chromium not installed"; exit 77; }
world="${DDP_DASHBOARD_WORLD:-8}"
start_coordinator dash "$world"
start_workers dash "$world" --steps-per-second 4 --epochs 3 --steps-per-epoch 200 --lag-rank 5 \
  --batch-size 128
wait_running
sleep "${DDP_DASHBOARD_WARMUP:-4}"
url="$("$bin/ddpctl" --dist-file "$df" dashboard)"
flags=(--headless --no-sandbox --disable-gpu --no-first-run --disable-dev-shm-usage
  --user-data-dir="$work/chrome-profile" --virtual-time-budget=5000)
dom="$(timeout 60 "$chrome" "${flags[@]}" --dump-dom "$url" 2>"$work/chrome.log")" ||
  fail "chromium failed: $(tail -5 "$work/chrome.log")"
step="$("$bin/ddpctl" --dist-file "$df" status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["step"])')"
python3 - "$dom" "$world" "$step" <<'PY' || fail "dashboard DOM"
import re, sys
dom, world, step = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = re.findall(r'<tr class="[a-z -]*" data-rank="(\d+)"', dom)
assert len(rows) == min(world, 200), ("rank rows", len(rows))
assert sorted(map(int, rows)) == list(range(min(world, 200))), rows
m = re.search(r'id="progress">epoch (\d+)/(\d+) · step (\d+)/(\d+)<', dom)
assert m, "no progress text in " + dom[:3000]
shown = int(m.group(3))
assert 0 < shown <= step, (shown, step)
assert 'class="badge s-RUNNING"' in dom
# The coordinator flags the lagging rank (behind, or silent); the page shows its flag.
assert re.search(r'class="flag-(behind|silent)" data-rank="5"', dom), "rank 5 not flagged"
PY
pass "dashboard DOM has the step and $world rank rows (rank 5 flagged)"
if [[ -n "${DDP_SCREENSHOT:-}" ]]; then
  timeout 60 "$chrome" "${flags[@]}" --hide-scrollbars --window-size=1280,900 \
    --screenshot="$DDP_SCREENSHOT" "$url" >/dev/null 2>&1 || fail "screenshot"
  "$bin/ddpctl" --dist-file "$df" status >"${DDP_STATUS_TEXT:-/dev/null}"
  pass "screenshot $DDP_SCREENSHOT"
fi
echo PASS
