#!/usr/bin/env bash
# slurm_trainer_spare — a node lost as a whole on a 3-node test Slurm cluster: slurm/multi-node.sbatch
# with SPARE_NODES=1 on 3 nodes trains on nodes 0 and 1 (1 worker each, world 2, CPU/Gloo) while
# node 2 stands by. Node 1's ddp-trainer task is SIGKILLed mid-training (its worker dies with it;
# the step goes on: srun --no-kill --kill-on-bad-exit=0). Its rank goes silent, the spare takes it
# over with the survivor's state, the job ends COMPLETED 0:0, and its final.pt is bitwise equal to
# an uninterrupted run with the same flags (srun on 2 nodes, in the background).
# SP_PREEMPT=1 (the ctest slurm_trainer_spare_preempt): after the takeover the kit's own requeue
# (`scancel --signal=USR1 --batch`) stops the job resumable. The step's exit code is then the
# killed task's (137), not the stop's: the kit must still requeue it (the coordinator's result file
# says STOPPED), and generation 1 resumes from the stop's checkpoint and completes.
export SLURM_HARNESS_NODES=3
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kit_lib.sh"
source "$(dirname "$0")/trainer_lib.sh"
tr_require

SP_DATA=${SP_DATA:-synthetic:8192x1x8x8:10}   # world 2, batch 16: 256 steps per epoch
SP_SEED=9
SP_PREEMPT=${SP_PREEMPT:-0}
job_restarts_is() { [[ "$(job_field "$1" Restarts)" == "$2" ]]; }

body() {
  local w=$T_WORK/sp ref=$T_WORK/ref job df j victim_pid task_pid rc step
  mkdir -p "$w" "$ref"
  local flags=(--backend gloo --data "$SP_DATA" --arch mlp --epochs 2 --batch-size 16 --lr 0.1
               --seed "$SP_SEED" --print-freq 50 --workers 0 --heartbeat-timeout 5 --linger 0)

  note "uninterrupted reference run (srun, 2 nodes x 1 worker), in the background"
  srun --job-name=ref --chdir="$ref" -N2 --ntasks-per-node=1 --gres=gpu:1 "$TR_TRAINER" \
    --nprocs-per-node 1 "${flags[@]}" --checkpoint-dir "$ref/ckpt" >"$ref/out" 2>&1 &
  local ref_pid=$!

  note "multi-node.sbatch, SPARE_NODES=1 on 3 nodes (gres gpu:1 per node -> world 2 + 1 spare)"
  job=$(SPARE_NODES=1 DATA=$SP_DATA EPOCHS=2 LR=0.1 SEED=$SP_SEED PRINT_FREQ=50 \
        EXTRA_ARGS="--workers 0 --heartbeat-timeout 5" \
        tr_submit sp --nodes=3 --gres=gpu:1 --cpus-per-task=1) || fail sbatch
  df=$w/dist_file.$job
  wait_until 120 "job $job training" tr_step_at_least "$df" 40 ||
    { show_job "$job"; dump_file "$w/job.out"; fail "never trained"; }
  wait_eval 30 "ddpctl status: 1 spare node" '[[ "$(tr_json_get "$(tr_status "$df")" spare_nodes)" == 1 ]]' ||
    { dump_file "$w/job.out"; dump_file "$df.coordinator.log"; fail "the spare never stood by"; }
  j=$(tr_status "$df")
  step=$(tr_json_get "$j" step)
  victim_pid=$(python3 -c 'import json,sys; print([r["pid"] for r in json.loads(sys.argv[1])["ranks"] if r["rank"]==1][0])' "$j")
  task_pid=$(ps -o ppid= -p "$victim_pid" | tr -d ' ')
  [[ -n "$task_pid" ]] && grep -q ddp-trainer "/proc/$task_pid/cmdline" 2>/dev/null ||
    fail "rank 1 (pid $victim_pid) has no ddp-trainer task as its parent ('$task_pid')"
  note "at step $step: kill -KILL node 1's ddp-trainer task (pid $task_pid) and with it rank 1 (pid $victim_pid)"
  kill -KILL "$task_pid"
  wait_eval 60 "ddpctl status: restarts 1, no spare left" \
    'j=$(tr_status "$df") && [[ "$(tr_json_get "$j" restarts)" == 1 && "$(tr_json_get "$j" spare_nodes)" == 0 ]]' ||
    { dump_file "$w/job.out"; dump_file "$df.coordinator.log"; fail "the spare never took over"; }

  if ((SP_PREEMPT)); then
    note "at step $(tr_json_get "$(tr_status "$df")" step): scancel --signal=USR1 --batch $job"
    scancel --signal=USR1 --batch "$job" || fail "scancel --signal=USR1"
    wait_until 90 "job $job requeued (Restarts=1)" job_restarts_is "$job" 1 ||
      { show_job "$job"; dump_file "$w/job.out"; dump_file "$df.coordinator.log"; fail "job was not requeued"; }
  fi

  wait_until 300 "job $job to end" job_done "$job" || { show_job "$job"; dump_file "$w/job.out"; fail "job did not end"; }
  local outcome; outcome="$(job_field "$job" JobState)/$(job_field "$job" ExitCode)"
  note "job $job: $outcome"
  [[ "$outcome" == "COMPLETED/$DDP_EXIT_OK:0" ]] ||
    { show_job "$job"; dump_file "$w/job.out"; dump_file "$df.coordinator.log"; fail "want COMPLETED/$DDP_EXIT_OK:0, got $outcome"; }
  expect_file_has "$w/job.out" 'taking over node 1'
  if ((SP_PREEMPT)); then
    expect_file_has "$w/job.out" "but the job STOPPED resumable on the others"
    expect_file_has "$w/job.out" 'resuming from'
    grep -E 'lost node|taking over|STOPPED|resuming from' "$w/job.out" | sed 's/^/    | /' | head -8
  else
    expect_file_has "$df.coordinator.log" 'lost node 1 \(host [^,]+, rank 1\): its task and workers went silent; spare node 2'
    expect_file_has "$w/job.out" 'but the job SUCCEEDED on the others'
    grep -E 'lost node|takes over|taking over|SUCCEEDED' "$w/job.out" "$df.coordinator.log" | sed 's/^/    | /' | head -8
    expect_file_lacks "$w/job.out" 'resuming from'
  fi

  wait "$ref_pid"; rc=$?
  ((rc == DDP_EXIT_OK)) || { dump_file "$ref/out"; fail "reference run exit $rc"; }
  [[ -s "$ref/ckpt/final.pt" && -s "$w/checkpoints/$job/final.pt" ]] || fail "final.pt missing"
  note "comparing final weights: taken over by the spare vs uninterrupted"
  tr_same_weights "$w/checkpoints/$job/final.pt" "$ref/ckpt/final.pt" ||
    { dump_file "$w/job.out"; fail "final weights differ from the uninterrupted run"; }
}

slurm_test_main "$@"
