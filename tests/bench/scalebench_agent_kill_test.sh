#!/usr/bin/env bash
# A scale run that loses a client process must not report a clean result: SIGKILL one
# ddp-rankgen (512 of 1,024 simulated ranks) while the ranks heartbeat; ddp-scalebench must exit
# non-zero and name the dead agent, and leave no process behind.
set -euo pipefail
bin="${DDP_BIN_DIR:?DDP_BIN_DIR is unset (run through ctest)}"
work="$(mktemp -d "${TMPDIR:-/tmp}/scalebench-kill.XXXXXX")"
sb_pid=""
cleanup() {
  [[ -n "$sb_pid" ]] && kill -9 "$sb_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; cat "$work/err" >&2 || true; exit 1; }

"$bin/ddp-scalebench" --target grpc --ranks 1024 --procs 2 --warmup 1 --window 4 \
  >"$work/out" 2>"$work/err" &
sb_pid=$!
for _ in $(seq 600); do grep -q "^scalebench: rendezvous:" "$work/err" && break; sleep 0.1; done
grep -q "^scalebench: rendezvous:" "$work/err" || fail "the run never reached the heartbeats"
mapfile -t agents < <(pgrep -P "$sb_pid" -f ddp-rankgen)
[[ ${#agents[@]} == 2 ]] || fail "expected 2 agents, found ${#agents[@]}"
mapfile -t all < <(pgrep -P "$sb_pid")
kill -KILL "${agents[0]}"
rc=0
wait "$sb_pid" || rc=$?
sb_pid=""
cat "$work/err"
[[ $rc != 0 ]] || fail "ddp-scalebench exited 0 after losing an agent"
grep -q "ddp-rankgen\[${agents[0]}\].*signal 9" "$work/err" || fail "the dead agent is not named"
logs="$(sed -n 's/.*(logs in \(.*ddp-scale\.[A-Za-z0-9]*\))$/\1/p' "$work/err")"
[[ -n "$logs" ]] && rm -rf "$logs"
for p in "${all[@]}"; do
  ! kill -0 "$p" 2>/dev/null || fail "process $p of the run is still there"
done
echo "ok: a lost agent fails the run (exit $rc) and every process is gone"
