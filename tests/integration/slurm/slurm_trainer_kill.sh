#!/usr/bin/env bash
# slurm_trainer_kill — a worker of the REAL ddp-trainer killed with SIGKILL in the middle of a
# running step started with `srun -K` (2 nodes x 2 workers, world 4, CPU/Gloo): the whole step
# ends within 30 s with a non-zero exit, the output names the lost rank (global rank and pid),
# ddpctl status (polled while the coordinator is still up) shows the job FAILED on that rank,
# and no process of the job is left. Fail-fast (--max-restarts 0): with restarts left the job
# recovers in place instead (docs/operations.md, "When a worker dies: in-job recovery").
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/trainer_lib.sh"
tr_require

body() {
  local w=$T_WORK/kill job df j victim_rank=3 victim_pid rc t0 dt
  mkdir -p "$w"
  note "srun -K -N2 --ntasks-per-node=1 ddp-trainer --nprocs-per-node 2 (long data set)"
  srun -K --job-name=killme --chdir="$w" -N2 --ntasks-per-node=1 "$TR_TRAINER" --nprocs-per-node 2 \
    --backend gloo --data synthetic:262144x1x8x8:10 --arch mlp --batch-size 16 --workers 0 \
    --epochs 2 --print-freq 200 --heartbeat-timeout 5 --max-restarts 0 >"$w/out" 2>&1 &
  local srun_pid=$!
  wait_eval 30 "job id" '[[ -n "$(squeue -h -n killme -o %i)" ]]' || fail "no job"
  job=$(squeue -h -n killme -o %i | head -1)
  df=$w/dist_file.$job
  wait_until 90 "job $job RUNNING" tr_state_is "$df" RUNNING || { dump_file "$w/out"; fail "never RUNNING"; }
  sleep 2
  j=$(tr_status "$df")
  tr_check_ranks "$j" 4 2 || fail "rank table wrong"
  victim_pid=$(python3 -c 'import json,sys; print([r["pid"] for r in json.loads(sys.argv[1])["ranks"] if r["rank"]==int(sys.argv[2])][0])' "$j" $victim_rank)
  [[ -n "$victim_pid" ]] && kill -0 "$victim_pid" || fail "rank $victim_rank pid '$victim_pid' not alive"
  note "kill -KILL rank $victim_rank (node 1, local rank 1, pid $victim_pid) at step $(tr_json_get "$j" step)"
  t0=$SECONDS
  kill -KILL "$victim_pid"
  # Watch the coordinator while it lasts; keep the last status that says the job failed.
  local last_failed=""
  while kill -0 "$srun_pid" 2>/dev/null && ((SECONDS - t0 < 40)); do
    j=$(tr_status "$df") && [[ "$(tr_json_get "$j" state)" == FAILED ]] && last_failed=$j
    sleep 0.3
  done
  if kill -0 "$srun_pid" 2>/dev/null; then
    kill -TERM "$srun_pid"; wait "$srun_pid"; dump_file "$w/out"
    fail "step still running 40 s after the kill"
  fi
  wait "$srun_pid"; rc=$?
  dt=$((SECONDS - t0))
  note "step ended ${dt}s after the kill, srun exit $rc"
  sed 's/^/    | /' "$w/out" | grep -vE 'Epoch: \[' | tail -25
  ((rc != DDP_EXIT_OK)) || fail "srun exit 0 after a worker was killed"
  ((dt <= 30)) || fail "step took ${dt}s (> 30 s) to end after the kill"
  grep -qE "pid $victim_pid\) killed by signal 9" "$w/out" || { dump_file "$w/out"; fail "the launcher did not name the killed worker (pid $victim_pid)"; }
  if grep -qE "rank $victim_rank \(host [^,]*, node 1, local rank 1, pid $victim_pid\)" "$w/out"; then
    note "output names the lost global rank: $(grep -oE "rank $victim_rank \(host [^)]*\)[^;]*" "$w/out" | head -1)"
  else
    dump_file "$df.coordinator.log"
    fail "output does not name the lost global rank $victim_rank (only the launcher's local rank/pid)"
  fi
  if [[ -n "$last_failed" ]]; then
    note "ddpctl status while the coordinator was up: state FAILED, failed_rank=$(tr_json_get "$last_failed" failed_rank), reason: $(tr_json_get "$last_failed" failure_reason)"
    [[ "$(tr_json_get "$last_failed" failed_rank)" == "$victim_rank" ]] ||
      fail "ddpctl status blames rank $(tr_json_get "$last_failed" failed_rank), not the killed rank $victim_rank"
  else
    note "ddpctl status never showed FAILED before the coordinator went away (srun -K ended it first)"
  fi
  wait_eval 20 "no process of the job left" '[[ -z "$(procs_mentioning "$w"; procs_in "$w")" ]]' ||
    { ps -o pid,args -p "$(procs_mentioning "$w" | tr '\n' ,)0" >&2; fail "processes left behind"; }
}

slurm_test_main "$@"
