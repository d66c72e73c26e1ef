#!/usr/bin/env bash
# slurm_trainer_scancel — `scancel <job>` of a running REAL ddp-trainer batch job
# (slurm/multi-node.sbatch, 2 nodes x 2 workers, world 4, CPU/Gloo): the job ends CANCELLED,
# is not requeued, and every process of it (batch shell, srun, both trainer tasks, the four
# workers, the coordinator) is gone on both nodes: nothing whose command line mentions the job's
# folder / dist_file, or whose cwd lies in it, survives.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kit_lib.sh"
source "$(dirname "$0")/trainer_lib.sh"
tr_require

# start_time PID: the process's start time in clock ticks since boot (/proc/PID/stat field 22);
# nothing for a zombie (it has ended; only its parent has not collected it yet).
start_time() { awk '{ sub(/.*\) /, ""); if ($1 != "Z") print $20 }' "/proc/$1/stat" 2>/dev/null; }

body() {
  local w=$T_WORK/cancel job df j before p
  job=$(DATA=synthetic:262144x1x8x8:10 EPOCHS=2 PRINT_FREQ=200 \
        EXTRA_ARGS="--workers 0 --heartbeat-timeout 5" \
        tr_submit cancel --gres=gpu:2 --cpus-per-task=2) || fail sbatch
  df=$w/dist_file.$job
  note "job $job; waiting until it trains"
  wait_until 120 "job $job RUNNING in ddpctl" tr_state_is "$df" RUNNING ||
    { show_job "$job"; dump_file "$w/job.out"; fail "never RUNNING"; }
  j=$(tr_status "$df")
  tr_check_ranks "$j" 4 2 || fail "rank table wrong"
  before=$(procs_mentioning "$w" | tr '\n' ' ')
  local -A starts=()
  for p in $before; do starts[$p]=$(start_time "$p"); done
  local pids_by_node; pids_by_node=$(python3 -c 'import json,sys; s=json.loads(sys.argv[1]); print(" ".join("node%d:%d" % (r["node_rank"], r["pid"]) for r in s["ranks"]))' "$j")
  note "processes mentioning $w: $before; workers: $pids_by_node"
  [[ "$pids_by_node" == *node0:* && "$pids_by_node" == *node1:* ]] || fail "workers not on both nodes"
  note "scancel $job"
  scancel "$job" || fail scancel
  wait_until 60 "job $job to end" job_done "$job" || { show_job "$job"; fail "job did not end"; }
  [[ "$(job_field "$job" JobState)/$(job_field "$job" Restarts)" == CANCELLED/0 ]] ||
    { show_job "$job"; dump_file "$w/job.out"; fail "want CANCELLED/0, got $(job_field "$job" JobState)/$(job_field "$job" Restarts)"; }
  local t0=$SECONDS
  wait_eval 30 "every process of job $job gone" '[[ -z "$(procs_mentioning "$w"; procs_in "$w")" ]]' || {
    ps -o pid,ppid,args -p "$( (procs_mentioning "$w"; procs_in "$w") | tr '\n' ,)0" >&2
    fail "processes survived scancel"
  }
  note "all processes gone $((SECONDS - t0))s after the job ended (pids before: $before)"
  # A pid alive now is the same process only if its start time matches (pids get reused);
  # a zombie has ended.
  for p in $before; do
    [[ -n "${starts[$p]:-}" && "$(start_time "$p")" == "${starts[$p]:-}" ]] &&
      { ps -o pid,ppid,stat,args -p "$p" >&2; fail "pid $p survived"; }
  done
  sleep 3
  [[ "$(job_field "$job" JobState)" == CANCELLED ]] || fail "cancelled job came back"
  grep -E 'ddp-kit|received|error' "$w/job.out" | sed 's/^/    | /' | tail -12
}

slurm_test_main "$@"
