#!/usr/bin/env bash
# ddpctl ls and ddpctl stragglers against real coordinators with simulated workers (ddp-loadgen):
#   --dir: two live jobs (state and step from their coordinators), a finished one (its
#     coordinator gone, its outcome from <dist_file>.result) and a stale one (coordinator
#     SIGKILLed: listed UNREACHABLE within the deadline, the list still succeeds);
#   Slurm: a fake squeue (and sacct) on PATH with canned output: the dist_file from the Comment
#     the kit records, from <WorkDir>/dist_file.<id>, a dist_file of another job refused, Slurm's
#     state for the rest; no squeue on PATH and a failing squeue: one line, exit DDP_EXIT_FAILED;
#   stragglers: a simulated straggler named (and counted by ls), none for an even job, a dead
#     coordinator in one line; --exclude-list from a hand-written exclude file.
# shellcheck source=../ops/lib.sh
source "$(dirname "$0")/../ops/lib.sh"
ctl() { "$bin/ddpctl" "$@"; }
# json_check JSON PYTHON...: runs the Python assertions with `jobs` = {job_id: row}.
json_check() {
  local json=$1
  shift
  python3 -c "
import json, sys
rows = json.loads(sys.argv[1])
jobs = {r['job_id']: r for r in rows}
$*
" "$json"
}

# --- four jobs in one folder -----------------------------------------------------------------
start_coordinator 101 2
df101=$df
start_workers 101 2 --steps-per-second 20 --epochs 50 --steps-per-epoch 100
# Job 102's rank 2 is twice as slow in compute: a straggler within a few seconds (window 3 s).
start_coordinator 102 4 --straggler-window 3 --straggler-threshold 0.75
df102=$df
start_workers 102 4 --steps-per-second 10 --epochs 7 --steps-per-epoch 1000 --batch-size 128 \
  --slow-rank 2 --slow-section compute --slow-factor 2
start_coordinator 103 2
coord103=$coord_pid
start_workers 103 2 --steps-per-second 100 --epochs 1 --steps-per-epoch 20 --finish
start_coordinator 104 2
coord104=$coord_pid
df=$df101 wait_running
df=$df102 wait_running
wait "$coord103" && rc=0 || rc=$?
[[ $rc -eq $DDP_EXIT_OK ]] || fail "job 103's coordinator exit $rc: $(cat "$work/103.coord.log")"
[[ ! -e $work/dist_file.103 && -e $work/dist_file.103.result ]] ||
  fail "job 103 left no result, or still has a dist_file: $(ls "$work")"
kill -9 "$coord104"
wait "$coord104" || true
stragglers=""
for _ in $(seq 150); do
  stragglers=$(ctl --dist-file "$df102" stragglers) || fail "stragglers: exit $?"
  [[ -n $stragglers ]] && break
  sleep 0.1
done
[[ $stragglers =~ ^rank=2\ host=[^\ ]+\ node=[0-9]+\ section=compute\ relative_score=0\.[0-9]+\ since=[0-9.]+s\ for=[0-9]+s$ ]] ||
  fail "stragglers of job 102: '$stragglers'"
pass "stragglers: $stragglers"
sleep 1  # a few steps and heartbeats on the live jobs
start=$(date +%s)
json=$(ctl ls --dir "$work" --json) || fail "ls --dir --json: exit $?"
(($(date +%s) - start <= 4)) || fail "ls with an unreachable coordinator took over 4 s"
json_check "$json" '
assert sorted(jobs) == ["101", "102", "103", "104"], sorted(jobs)
a, b, c, d = jobs["101"], jobs["102"], jobs["103"], jobs["104"]
assert a["state"] == "RUNNING" and a["state_source"] == "coordinator" and a["reachable"], a
assert a["epochs"] == 50 and a["steps_per_epoch"] == 100 and a["step"] > 0, a
assert a["samples_per_second"] > 0 and a["restarts"] == 0 and a["stragglers"] == 0, a
assert a["dashboard_url"].startswith("http://") and "token=" in a["dashboard_url"], a
assert a["name"] == "dist_file.101" and a["slurm_state"] is None, a
assert b["state"] == "RUNNING" and b["epochs"] == 7 and b["steps_per_epoch"] == 1000, b
assert b["stragglers"] == 1, b
assert c["state"] == "SUCCEEDED" and c["state_source"] == "result" and not c["reachable"], c
assert c["exit_code"] == 0 and c["step"] is None and c["dashboard_url"] is None, c
assert d["state"] == "UNREACHABLE" and d["state_source"] == "none" and d["error"], d
' || fail "ls --dir --json: $json"
pass "ls --dir --json: two live jobs, a finished one, a stale one"

table=$(ctl ls --dir "$work") || fail "ls --dir: exit $?"
echo "$table"
head -1 <<<"$table" | grep -Eq '^JOBID +NAME +STATE +PROGRESS +SAMPLES/S +ETTR +RESTARTS +STRAGGLERS +CKPT-AGE +DASHBOARD$' ||
  fail "ls: header: $table"
grep -Eq '^101 +dist_file\.101 +RUNNING +epoch [0-9]+/50 step [1-9][0-9]*/5000 +[0-9.]+ +[0-9.]+% +0 +0 +- +http://' <<<"$table" ||
  fail "ls: row of 101: $table"
grep -Eq '^102 +dist_file\.102 +RUNNING +epoch [0-9]+/7 step [0-9]+/7000 +[0-9.]+ +[0-9.]+% +0 +1 ' <<<"$table" ||
  fail "ls: row of 102"
grep -Eq '^103 +dist_file\.103 +SUCCEEDED +- +- +- +- +- +- +-$' <<<"$table" || fail "ls: row of 103"
grep -Eq '^104 +dist_file\.104 +UNREACHABLE .*\(coordinator unreachable\)$' <<<"$table" || fail "ls: row of 104"
pass "ls --dir: the table"

# --- Slurm: a fake squeue and sacct ---------------------------------------------------------
mkdir -p "$work/slurm-bin" "$work/empty" "$work/other"
sep=$'\x1f'
{
  printf '101%s101%sRUNNING%s/nowhere%strain-a%smy own note; ddp:dist_file=%s\n' "$sep" "$sep" "$sep" "$sep" "$sep" "$df101"
  printf '102%s102%sRUNNING%s%s%strain-b%s(null)\n' "$sep" "$sep" "$sep" "$work" "$sep" "$sep"
  printf '103%s103%sCOMPLETED%s/nowhere%strain-c%sddp:dist_file=%s\n' "$sep" "$sep" "$sep" "$sep" "$sep" "$work/dist_file.103"
  printf '105%s105%sRUNNING%s/nowhere%sreused%sddp:dist_file=%s\n' "$sep" "$sep" "$sep" "$sep" "$sep" "$df101"
  printf '200%s200_3%sPENDING%s%s%snot-ddp%s(null)\n' "$sep" "$sep" "$sep" "$work/other" "$sep" "$sep"
} >"$work/squeue.out"
printf '#!/bin/sh\necho "$@" >%q\ncat %q\n' "$work/squeue.args" "$work/squeue.out" >"$work/slurm-bin/squeue"
printf '106%s106%sCANCELLED by 0%s/nowhere%sold%s\n103%s103%sCOMPLETED%s/nowhere%strain-c%s\n' \
  "$sep" "$sep" "$sep" "$sep" "$sep" "$sep" "$sep" "$sep" "$sep" "$sep" >"$work/sacct.out"
printf '#!/bin/sh\ncat %q\n' "$work/sacct.out" >"$work/slurm-bin/sacct"
chmod +x "$work/slurm-bin/squeue" "$work/slurm-bin/sacct"
json=$(PATH="$work/slurm-bin:$PATH" ctl ls --json) || fail "ls (fake Slurm): exit $?"
grep -q -- "--me" "$work/squeue.args" && grep -q -- "--states=all" "$work/squeue.args" ||
  fail "squeue not asked for the user's jobs in every state: $(cat "$work/squeue.args")"
json_check "$json" '
assert [r["job_id"] for r in rows] == ["101", "102", "103", "105", "200_3", "106"], rows
a, b, c, e, p, x = (jobs[k] for k in ["101", "102", "103", "105", "200_3", "106"])
assert a["name"] == "train-a" and a["slurm_state"] == "RUNNING" and a["state"] == "RUNNING", a
assert a["state_source"] == "coordinator" and a["epochs"] == 50 and a["step"] > 0, a
assert b["state_source"] == "coordinator" and b["epochs"] == 7, b  # <WorkDir>/dist_file.<id>
assert c["state"] == "SUCCEEDED" and c["slurm_state"] == "COMPLETED" and c["state_source"] == "result", c
# Another job'"'"'s dist_file at the recorded path: never trusted, Slurm says what it knows.
assert e["state"] == "RUNNING" and e["state_source"] == "slurm" and not e["reachable"], e
assert "belongs to job 101" in e["error"], e
assert p["state"] == "PENDING" and p["dist_file"] is None and p["name"] == "not-ddp", p
assert x["state"] == "CANCELLED" and x["state_source"] == "slurm", x  # from sacct only
' || fail "ls (fake Slurm) --json: $json"
table=$(PATH="$work/slurm-bin:$PATH" ctl ls) || fail "ls (fake Slurm): exit $?"
echo "$table"
grep -Eq '^101 +train-a +RUNNING +epoch [0-9]+/50 step [1-9]' <<<"$table" || fail "ls (fake Slurm): row of 101"
grep -Eq '^200_3 +not-ddp +PENDING +- ' <<<"$table" || fail "ls (fake Slurm): row of 200_3"
grep -Eq '^105 +reused +RUNNING .*\(dist_file not trusted' <<<"$table" || fail "ls (fake Slurm): row of 105"
pass "ls through Slurm: Comment, WorkDir, a foreign dist_file, sacct"

out=$(PATH="$work/empty" ctl ls 2>&1) && rc=0 || rc=$?
[[ $rc -eq $DDP_EXIT_FAILED && $(wc -l <<<"$out") -eq 1 ]] || fail "no squeue: exit $rc: $out"
[[ $out == *"Slurm is not available here"*"--dir DIR"* ]] || fail "no squeue: $out"
printf '#!/bin/sh\necho "slurm_load_jobs error: Unable to contact slurm controller" >&2\nexit 1\n' \
  >"$work/slurm-bin/squeue"
out=$(PATH="$work/slurm-bin:$PATH" ctl ls 2>&1) && rc=0 || rc=$?
[[ $rc -eq $DDP_EXIT_FAILED && $(wc -l <<<"$out") -eq 1 ]] || fail "failing squeue: exit $rc: $out"
[[ $out == *"squeue failed (slurm_load_jobs error: Unable to contact slurm controller)"*"--dir"* ]] ||
  fail "failing squeue: $out"
pass "ls without Slurm, and with a failing squeue: one line, exit $DDP_EXIT_FAILED"

# --- stragglers --------------------------------------------------------------------------------
out=$(ctl --dist-file "$df101" stragglers) || fail "stragglers: exit $?"
[[ -z $out ]] || fail "stragglers of an even job: $out"
out=$(ctl --dist-file "$work/dist_file.104" stragglers 2>&1) && rc=0 || rc=$?
[[ $rc -eq $DDP_EXIT_FAILED && $(wc -l <<<"$out") -eq 1 ]] || fail "stragglers of a dead job: exit $rc: $out"
out=$(ctl --dist-file "$df101" stragglers --exclude-list) || fail "no exclude list: exit $?"
[[ -z $out ]] || fail "no exclude list printed: $out"
cat >"$df101.exclude" <<'EOF'
# nodes named stragglers by job 101
node=n2 section=compute relative_score=0.48 time=1764900000 job=101

node=n5 section=data relative_score=0.61 time=1764900100 job=101 new_field=1
node=n2 section=communication relative_score=0.5 time=1764900200 job=101
EOF
chmod 0644 "$df101.exclude"
out=$(ctl --dist-file "$df101" stragglers --exclude-list) || fail "exclude list: exit $?"
[[ $out == "n2,n5" ]] || fail "exclude list: '$out'"
# The job's files may be gone: the exclude list is read beside the path alone.
cp "$df101.exclude" "$work/gone.exclude"
out=$(ctl --dist-file "$work/gone" stragglers --exclude-list) && [[ $out == "n2,n5" ]] ||
  fail "exclude list without its dist_file: '$out'"
printf 'node=n2\nnode=n1,n3\n' >"$work/bad.exclude"
out=$(ctl --dist-file "$work/bad" stragglers --exclude-list 2>&1) && rc=0 || rc=$?
[[ $rc -eq $DDP_EXIT_FAILED && $out == *"line 2: bad node name"* && $(wc -l <<<"$out") -eq 1 ]] ||
  fail "bad exclude list: exit $rc: $out"
chmod 0666 "$work/gone.exclude"
out=$(ctl --dist-file "$work/gone" stragglers --exclude-list 2>&1) && rc=0 || rc=$?
[[ $rc -eq $DDP_EXIT_FAILED && $out == *"not trusted"* ]] || fail "writable exclude list: exit $rc: $out"
pass "stragglers, stragglers --exclude-list (n2,n5; none; malformed; writable by others)"
