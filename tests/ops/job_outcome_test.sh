#!/usr/bin/env bash
# No decision is taken from a log line. A holder of the control token stops a job with a reason
# that carries newlines and a copy of the coordinator's success line: the coordinator's log keeps
# it on one escaped line, and the kit's outcome function (slurm/lib/ddp.sh ddp_job_outcome), which
# reads the result file the coordinator writes beside the dist_file, still reports the failure. A
# job that does finish reads SUCCEEDED from a private (0600) result file; an outcome left at the
# path by an earlier job is removed when a new coordinator starts there.
source "$(dirname "$0")/lib.sh"
stamp='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+ ddp-coordinator: '

# --- forged success line in a stop reason ------------------------------------------------------
start_coordinator forge 2 --log-file "$work/dist_file.forge.coordinator.log"
log="$df.coordinator.log"
start_workers forge 2 --steps-per-second 10 --epochs 100
wait_running
forged=$'no reason\njob SUCCEEDED: every rank finished\n\e[2K'
"$bin/ddpctl" --dist-file "$df" stop --now --reason "$forged" --wait 30 >"$work/stop.out" 2>&1 ||
  true
rc=0
timeout 60 tail --pid="$coord_pid" -f /dev/null || fail "coordinator still runs 60 s after stop"
wait "$coord_pid" || rc=$?
((rc != DDP_EXIT_OK)) || fail "a stopped job's coordinator exited $rc"
[[ -s "$log" ]] || fail "no coordinator log at $log"
bad="$(grep -Ev "$stamp" "$log" || true)"
[[ -z "$bad" ]] || fail "a log line that the coordinator did not start:
$bad"
hits="$(grep -c 'job SUCCEEDED: every rank finished' "$log" || true)"
forged_line="$(grep -F 'no reason\njob SUCCEEDED: every rank finished\n\x1b[2K' "$log" || true)"
[[ -n "$forged_line" ]] || fail "the reason is not in the log, escaped: $(cat "$log")"
grep -q $'\e' "$log" && fail "an escape character reached the log"
outcome="$(ddp_job_outcome "$df")" && fail "ddp_job_outcome succeeded for a stopped job"
[[ "$outcome" == FAILED || "$outcome" == STOPPED ]] ||
  fail "ddp_job_outcome: '$outcome', want FAILED or STOPPED"
grep -q "^state=$outcome$" "$df.result" || fail "result file: $(cat "$df.result")"
pass "forged reason: one escaped log line ($hits with the success text), outcome $outcome (exit $rc)"

# --- a job that finishes -----------------------------------------------------------------------
start_coordinator done 2
start_workers done 2 --steps-per-second 50 --epochs 1 --steps-per-epoch 20 --finish
rc=0
timeout 60 tail --pid="$coord_pid" -f /dev/null || fail "the job did not end within 60 s"
wait "$coord_pid" || rc=$?
((rc == DDP_EXIT_OK)) || fail "finished job: coordinator exit $rc: $(tail -5 "$work/done.coord.log")"
outcome="$(ddp_job_outcome "$df")" || fail "ddp_job_outcome: '$outcome' for a finished job"
[[ "$outcome" == SUCCEEDED ]] || fail "ddp_job_outcome: $outcome"
[[ "$(stat -c %a "$df.result")" == 600 ]] || fail "result file mode $(stat -c %a "$df.result")"
grep -qx 'job_id=done' "$df.result" && grep -qx 'exit_code=0' "$df.result" ||
  fail "result file: $(cat "$df.result")"
chmod 0622 "$df.result"
ddp_job_outcome "$df" >/dev/null && fail "a result file others may write was trusted"
chmod 0600 "$df.result"
pass "finished job: SUCCEEDED from a 0600 result file; one others may write is not trusted"

# --- an earlier job's outcome does not speak for the next -------------------------------------
cp "$df.result" "$work/stale.result"
start_coordinator done 2 # the same dist_file path again
[[ ! -e "$df.result" ]] || fail "the earlier job's result file survived a new coordinator"
outcome="$(ddp_job_outcome "$df")" && fail "an outcome before the job ended: $outcome"
[[ "$outcome" == UNKNOWN ]] || fail "ddp_job_outcome while running: $outcome"
kill "$coord_pid"
pass "a new coordinator removes the earlier result; none yet reads UNKNOWN"
echo PASS
