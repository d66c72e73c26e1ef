#!/usr/bin/env bash
# slurm_ddpctl_ls — `ddpctl ls` on a real cluster. Three jobs go through the sbatch kit
# (single-node template) with a stand-in trainer that runs a real ddp-coordinator and simulated
# workers (ddp-loadgen) at the kit's dist_file: two keep running, one finishes. The kit records
# each dist_file in the job's Comment (after the user's own comment, which stays); `ddpctl ls`
# finds the jobs through squeue alone, shows the running ones' progress from their coordinators
# and the finished one's outcome from its result file while Slurm still lists it COMPLETED. A job
# whose Comment cannot be updated runs all the same (a warning), and ls finds it by its WorkDir.
source "$(dirname "$0")/lib.sh"
# shellcheck source=kit_lib.sh
source "$(dirname "$0")/kit_lib.sh"

# ls_submit NAME LOADGEN-ARGS SBATCH-OPTS...: submit the single-node template from $T_WORK/NAME
# with the stand-in trainer; prints the job id.
ls_submit() {
  local name=$1 loadgen_args=$2
  shift 2
  mkdir -p "$T_WORK/$name"
  (cd "$T_WORK/$name" &&
    DDP_TRAINER=$T_WORK/trainer.sh LS_LOADGEN_ARGS=$loadgen_args \
      sbatch --parsable --export=ALL --job-name="$name" --output="$T_WORK/$name/job.out" \
      --gres=gpu:1 --cpus-per-task=1 --time=5 "$@" "$KIT/single-node-multi-gpu.sbatch")
}

# ls_json_ok JSON PYTHON...: the Python assertions with `jobs` = {job_id: row}.
ls_json_ok() {
  local json=$1
  shift
  python3 -c "
import json, sys
jobs = {r['job_id']: r for r in json.loads(sys.argv[1])}
$*
" "$json"
}

body() {
  local ctl bindir a b c d json table
  ctl=$(ddp_find_bin ddpctl) || fail "ddpctl not built"
  bindir=$(dirname "$ctl")
  [[ -x $bindir/ddp-coordinator && -x $bindir/ddp-loadgen ]] || fail "ddp-coordinator or ddp-loadgen not built in $bindir"
  # The stand-in trainer: the job's coordinator and two simulated workers at --dist-file.
  cat >"$T_WORK/trainer.sh" <<EOF
#!/usr/bin/env bash
df="" prev=""
for a in "\$@"; do [[ \$prev == --dist-file ]] && df=\$a; prev=\$a; done
"$bindir/ddp-coordinator" --world-size 2 --dist-file "\$df" --listen 127.0.0.1:0 --linger 1 &
coord=\$!
for i in \$(seq 100); do [[ -s \$df ]] && break; sleep 0.1; done
"$bindir/ddp-loadgen" --dist-file "\$df" --workers 2 --per-node 2 \$LS_LOADGEN_ARGS >"\$df.loadgen.log" 2>&1
wait \$coord
EOF
  chmod +x "$T_WORK/trainer.sh"

  note "submit: a job that finishes, two that keep running (one with a comment of its own)"
  c=$(ls_submit ls-done "--steps-per-second 50 --epochs 1 --steps-per-epoch 20 --finish") || fail "sbatch ls-done"
  # A job whose Comment cannot be updated (scontrol refuses): it runs all the same, and ls finds
  # it by its WorkDir.
  mkdir -p "$T_WORK/deny-bin"
  printf '#!/bin/sh
[ "$1" = update ] && { echo "scontrol: Access/permission denied" >&2; exit 1; }
exec %q "$@"
' \
    "$(command -v scontrol)" >"$T_WORK/deny-bin/scontrol"
  chmod +x "$T_WORK/deny-bin/scontrol"
  d=$(PATH="$T_WORK/deny-bin:$PATH" ls_submit ls-nocomment "--steps-per-second 50 --epochs 1 --steps-per-epoch 20 --finish") ||
    fail "sbatch ls-nocomment"
  a=$(ls_submit ls-run-a "--steps-per-second 10 --epochs 90 --steps-per-epoch 100" --comment="my own note") || fail "sbatch ls-run-a"
  b=$(ls_submit ls-run-b "--steps-per-second 5 --epochs 3 --steps-per-epoch 1000") || fail "sbatch ls-run-b"
  wait_until 40 "job $c done" job_done "$c" || { dump_case ls-done "$c"; fail "job $c did not end"; }
  job_state_is "$c" COMPLETED || { dump_case ls-done "$c"; fail "job $c: $(job_field "$c" JobState)"; }
  wait_until 40 "job $d done" job_done "$d" || { dump_case ls-nocomment "$d"; fail "job $d did not end"; }
  job_state_is "$d" COMPLETED || { dump_case ls-nocomment "$d"; fail "job $d: $(job_field "$d" JobState)"; }
  expect_file_has "$T_WORK/ls-nocomment/job.out" "warning: could not record the dist_file"

  note "ddpctl ls: both running jobs answer, the finished one reads SUCCEEDED"
  local check="a, b, c, d = jobs['$a'], jobs['$b'], jobs['$c'], jobs['$d']"'
for r in (a, b):
    assert r["state"] == "RUNNING" and r["state_source"] == "coordinator", r
    assert r["slurm_state"] == "RUNNING" and r["step"] > 0, r
    assert r["dashboard_url"].startswith("http://"), r
assert a["name"] == "ls-run-a" and a["epochs"] == 90 and a["steps_per_epoch"] == 100, a
assert b["name"] == "ls-run-b" and b["epochs"] == 3 and b["steps_per_epoch"] == 1000, b
assert c["name"] == "ls-done" and c["slurm_state"] == "COMPLETED", c
assert c["state"] == "SUCCEEDED" and c["state_source"] == "result" and c["exit_code"] == 0, c
assert d["state"] == "SUCCEEDED" and d["state_source"] == "result" and d["slurm_state"] == "COMPLETED", d
'
  wait_eval 40 "ls shows both running jobs with progress" \
    'ls_json_ok "$("$ctl" ls --json)" "$check"' || {
    json=$("$ctl" ls --json)
    ls_json_ok "$json" "$check"
    dump_case ls-run-a "$a"
    fail "ddpctl ls --json: $json"
  }
  [[ $(squeue --noheader --states=all --jobs="$a" --format=%k) == "my own note ddp:dist_file=$T_WORK/ls-run-a/dist_file.$a" ]] ||
    fail "comment of $a: $(squeue --noheader --states=all --jobs="$a" --format=%k)"
  [[ $(squeue --noheader --states=all --jobs="$c" --format=%k) == "ddp:dist_file=$T_WORK/ls-done/dist_file.$c" ]] ||
    fail "comment of $c: $(squeue --noheader --states=all --jobs="$c" --format=%k)"
  table=$("$ctl" ls) || fail "ddpctl ls: exit $?"
  echo "$table" | sed 's/^/    /'
  grep -Eq "^$a +ls-run-a +RUNNING +epoch [0-9]+/90 step [1-9][0-9]*/9000 " <<<"$table" || fail "row of $a"
  grep -Eq "^$b +ls-run-b +RUNNING +epoch [0-9]+/3 step [1-9][0-9]*/3000 " <<<"$table" || fail "row of $b"
  grep -Eq "^$c +ls-done +SUCCEEDED +- " <<<"$table" || fail "row of $c"
  scancel "$a" "$b"
  wait_until 30 "jobs $a $b cancelled" eval "job_done $a && job_done $b" || fail "jobs did not end"
}

slurm_test_main "$@"
