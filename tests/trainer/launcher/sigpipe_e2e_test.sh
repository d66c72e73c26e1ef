#!/usr/bin/env bash
# A reader of ddp-trainer's output that goes away does not end the job: `ddp-trainer ... | head -n 3`
# (stdout: the workers' progress lines) and `ddp-trainer ... 2>&1 | head -n 3` (also the launcher's
# and the coordinator's lines) both train to the end, write final.pt and exit 0 (PIPESTATUS), the
# writes after head has left failing with EPIPE instead of killing the writer with SIGPIPE.
set -euo pipefail
bin="${DDP_BIN_DIR:?DDP_BIN_DIR is unset (run through ctest)}"
work="$(mktemp -d "${TMPDIR:-/tmp}/sigpipe-e2e.XXXXXX")"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# run NAME STDERR_TOO: the job piped into head -n 3; checks its exit status, final.pt, head's lines.
run() {
  local name=$1 both=$2 ckpt="$work/ckpt.$1" df="$work/df.$1" st
  local -a args=(--nprocs-per-node 2 --data synthetic:2048 --arch mlp --epochs 3 --batch-size 16
    --no-eval --print-freq 1 --linger 0 --checkpoint-dir "$ckpt" --dist-file "$df")
  set +e +o pipefail
  if ((both)); then
    timeout 240 "$bin/ddp-trainer" "${args[@]}" 2>&1 | head -n 3 >"$work/$name.head"
    st=("${PIPESTATUS[@]}")
  else
    timeout 240 "$bin/ddp-trainer" "${args[@]}" 2>"$work/$name.err" | head -n 3 >"$work/$name.head"
    st=("${PIPESTATUS[@]}")
  fi
  set -e -o pipefail
  [[ "${st[0]}" == 0 ]] ||
    fail "$name: ddp-trainer exited ${st[0]} (head ${st[1]}): $(tail -5 "$work/$name.err" 2>/dev/null)"
  [[ -s "$ckpt/final.pt" ]] || fail "$name: no final.pt in $ckpt: $(ls "$ckpt" 2>&1)"
  [[ "$(wc -l <"$work/$name.head")" == 3 ]] || fail "$name: head got: $(cat "$work/$name.head")"
  echo "ok: $name: exit 0, final.pt written, head read 3 lines"
}
run stdout 0
run stdout-and-stderr 1
echo PASS
