#!/usr/bin/env bash
# slurm_trainer_coordinator_restart — a coordinator that comes back, on the test Slurm cluster:
# slurm/multi-node.sbatch runs the REAL ddp-trainer on 2 nodes x 1 worker (world 2, CPU/Gloo);
# the job's coordinator (a child of task 0 on node 0) is SIGKILLed in the middle of training.
# Task 0 restarts it from its journal (--resume-from-journal, a new incarnation of the
# dist_file), both workers re-attach without stopping, `ddpctl status` answers again within
# 10 s, and the job ends COMPLETED 0:0 with a final.pt bitwise equal to an uninterrupted run with
# the same flags (srun, in the background, started at the same time).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kit_lib.sh"
source "$(dirname "$0")/trainer_lib.sh"
tr_require

CR_DATA=${CR_DATA:-synthetic:4096x1x8x8:10}   # world 2, batch 16: 128 steps per epoch
CR_SEED=7

incarnation_of() { sed -n 's/^incarnation=//p' "$1" 2>/dev/null; }

body() {
  local w=$T_WORK/cr ref=$T_WORK/ref job df j coord_pid rc step t0 t1
  mkdir -p "$w" "$ref"
  local flags=(--backend gloo --data "$CR_DATA" --arch mlp --epochs 2 --batch-size 16 --lr 0.1
               --seed "$CR_SEED" --print-freq 50 --workers 0 --heartbeat-timeout 5 --linger 0)

  note "uninterrupted reference run (srun, 2 nodes x 1 worker), in the background"
  srun --job-name=ref --chdir="$ref" -N2 --ntasks-per-node=1 --gres=gpu:1 "$TR_TRAINER" \
    --nprocs-per-node 1 "${flags[@]}" --checkpoint-dir "$ref/ckpt" >"$ref/out" 2>&1 &
  local ref_pid=$!

  note "multi-node.sbatch with the real trainer (gres gpu:1 per node -> world 2), defaults"
  job=$(DATA=$CR_DATA EPOCHS=2 LR=0.1 SEED=$CR_SEED PRINT_FREQ=50 \
        EXTRA_ARGS="--workers 0 --heartbeat-timeout 5" \
        tr_submit cr --gres=gpu:1 --cpus-per-task=1) || fail sbatch
  df=$w/dist_file.$job
  wait_until 120 "job $job training" tr_step_at_least "$df" 30 ||
    { show_job "$job"; dump_file "$w/job.out"; fail "never trained"; }
  step=$(tr_json_get "$(tr_status "$df")" step)
  coord_pid=$(sed -n 's/.*started coordinator (pid \([0-9]*\),.*/\1/p' "$w/job.out" | head -1)
  [[ -n "$coord_pid" ]] && kill -0 "$coord_pid" || { dump_file "$w/job.out"; fail "coordinator pid '$coord_pid' not alive"; }
  note "at step $step: kill -KILL the coordinator (pid $coord_pid)"
  kill -KILL "$coord_pid"
  t0=$(date +%s.%N)
  # Polled every 0.1 s: the figure is the time to the first answer of the new incarnation.
  until [[ "$(incarnation_of "$df")" == 1 ]] && tr_status "$df" >/dev/null; do
    python3 -c "import sys; sys.exit($(date +%s.%N) - $t0 > 10)" ||
      { dump_file "$w/job.out"; dump_file "$df.coordinator.log"; fail "ddpctl status did not answer within 10 s"; }
    sleep 0.1
  done
  t1=$(date +%s.%N)
  note "ddpctl status answered $(python3 -c "print(f'{$t1 - $t0:.2f}')") s after the SIGKILL"

  wait_until 300 "job $job to end" job_done "$job" || { show_job "$job"; dump_file "$w/job.out"; fail "job did not end"; }
  local outcome; outcome="$(job_field "$job" JobState)/$(job_field "$job" ExitCode)"
  note "job $job: $outcome"
  [[ "$outcome" == "COMPLETED/$DDP_EXIT_OK:0" ]] ||
    { show_job "$job"; dump_file "$w/job.out"; dump_file "$df.coordinator.log"; fail "want COMPLETED/$DDP_EXIT_OK:0, got $outcome"; }
  expect_file_has "$w/job.out" "coordinator \\(pid $coord_pid\\) killed by signal 9; restarting it from its journal \\(1 of 3\\)"
  expect_file_has "$df.coordinator.log" 'restored from the journal \(incarnation 1\)'
  expect_file_lacks "$w/job.out" 'restarting it from its journal \(2 of'
  grep -E 'restarting it|restored from the journal' "$w/job.out" "$df.coordinator.log" | sed 's/^/    | /' | head -4

  wait "$ref_pid"; rc=$?
  ((rc == DDP_EXIT_OK)) || { dump_file "$ref/out"; fail "reference run exit $rc"; }
  [[ -s "$ref/ckpt/final.pt" && -s "$w/checkpoints/$job/final.pt" ]] || fail "final.pt missing"
  note "comparing final weights: coordinator restarted vs uninterrupted"
  tr_same_weights "$w/checkpoints/$job/final.pt" "$ref/ckpt/final.pt" ||
    { dump_file "$w/job.out"; fail "final weights differ from the uninterrupted run"; }
}

slurm_test_main "$@"
