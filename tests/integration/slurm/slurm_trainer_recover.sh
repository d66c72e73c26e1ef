#!/usr/bin/env bash
# slurm_trainer_recover — in-job recovery on the test Slurm cluster: slurm/multi-node.sbatch (in-job
# recovery on by default) runs the REAL ddp-trainer on 2 nodes x 1 worker (world 2, CPU/Gloo); the
# worker of node 1 is SIGKILLed in the middle of training. The node's ddp-trainer task respawns it
# on the same node and local rank, the job carries on and ends COMPLETED 0:0 with one restart,
# and its final.pt is bitwise equal to an uninterrupted run with the same flags (srun, in the
# background, started at the same time).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kit_lib.sh"
source "$(dirname "$0")/trainer_lib.sh"
tr_require

RC_DATA=${RC_DATA:-synthetic:8192x1x8x8:10}   # world 2, batch 16: 256 steps per epoch
RC_SEED=5

body() {
  local w=$T_WORK/rc ref=$T_WORK/ref job df j victim_pid rc step
  mkdir -p "$w" "$ref"
  local flags=(--backend gloo --data "$RC_DATA" --arch "${TR_ARCH:-mlp}" --epochs 2 --batch-size 16 --lr 0.1
               --seed "$RC_SEED" --print-freq 50 --workers 0 --heartbeat-timeout 5 --linger 0)

  note "uninterrupted reference run (srun, 2 nodes x 1 worker), in the background"
  srun --job-name=ref --chdir="$ref" -N2 --ntasks-per-node=1 --gres=gpu:1 "$TR_TRAINER" \
    --nprocs-per-node 1 "${flags[@]}" --checkpoint-dir "$ref/ckpt" >"$ref/out" 2>&1 &
  local ref_pid=$!

  note "multi-node.sbatch with the real trainer (gres gpu:1 per node -> world 2), defaults"
  job=$(DATA=$RC_DATA EPOCHS=2 LR=0.1 SEED=$RC_SEED PRINT_FREQ=50 \
        EXTRA_ARGS="--workers 0 --heartbeat-timeout 5" \
        tr_submit rc --gres=gpu:1 --cpus-per-task=1) || fail sbatch
  df=$w/dist_file.$job
  wait_until 120 "job $job training" tr_step_at_least "$df" 40 ||
    { show_job "$job"; dump_file "$w/job.out"; fail "never trained"; }
  j=$(tr_status "$df")
  step=$(tr_json_get "$j" step)
  victim_pid=$(python3 -c 'import json,sys; print([r["pid"] for r in json.loads(sys.argv[1])["ranks"] if r["rank"]==1][0])' "$j")
  [[ -n "$victim_pid" ]] && kill -0 "$victim_pid" || fail "rank 1 pid '$victim_pid' not alive"
  note "at step $step: kill -KILL rank 1 (node 1, pid $victim_pid)"
  kill -KILL "$victim_pid"
  wait_eval 60 "ddpctl status: restarts 1" '[[ "$(tr_json_get "$(tr_status "$df")" restarts)" == 1 ]]' ||
    { dump_file "$w/job.out"; dump_file "$df.coordinator.log"; fail "ddpctl status never showed restarts 1"; }

  wait_until 300 "job $job to end" job_done "$job" || { show_job "$job"; dump_file "$w/job.out"; fail "job did not end"; }
  local outcome; outcome="$(job_field "$job" JobState)/$(job_field "$job" ExitCode)"
  note "job $job: $outcome"
  [[ "$outcome" == "COMPLETED/$DDP_EXIT_OK:0" ]] ||
    { show_job "$job"; dump_file "$w/job.out"; dump_file "$df.coordinator.log"; fail "want COMPLETED/$DDP_EXIT_OK:0, got $outcome"; }
  expect_file_has "$df.coordinator.log" 'restart 1 of 3'
  expect_file_lacks "$df.coordinator.log" 'restart 2 of'
  grep -qE "pid $victim_pid\) killed by signal 9" "$w/job.out" ||
    { dump_file "$w/job.out"; fail "the node's task did not name the killed worker (pid $victim_pid)"; }
  grep -E 'restart 1 of|recovered|killed by signal 9' "$w/job.out" "$df.coordinator.log" | sed 's/^/    | /' | head -8
  expect_file_lacks "$w/job.out" 'resuming from'

  wait "$ref_pid"; rc=$?
  ((rc == DDP_EXIT_OK)) || { dump_file "$ref/out"; fail "reference run exit $rc"; }
  [[ -s "$ref/ckpt/final.pt" && -s "$w/checkpoints/$job/final.pt" ]] || fail "final.pt missing"
  note "comparing final weights: recovered in place vs uninterrupted"
  tr_same_weights "$w/checkpoints/$job/final.pt" "$ref/ckpt/final.pt" ||
    { dump_file "$w/job.out"; fail "final weights differ from the uninterrupted run"; }
}

slurm_test_main "$@"
