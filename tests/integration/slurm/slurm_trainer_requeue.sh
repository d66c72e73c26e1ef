#!/usr/bin/env bash
# slurm_trainer_requeue — the REAL ddp-trainer through slurm/multi-node.sbatch (2 nodes x 1
# worker, world 2, CPU/Gloo): `scancel --signal=USR1 --batch` mid-epoch -> the trainer
# checkpoints and exits 3 -> the kit requeues -> generation 1 resumes mid-epoch ("resuming from
# ...: N samples of the epoch done", N > 0) and finishes; its final.pt is bitwise equal to the
# final.pt of an uninterrupted srun of the same flags (same seed, same world size).
# Also: generation 1 ignores generation 0's dist_file. Between the generations the test puts a
# generation-0 dist_file of this job (pointing at a dead address) at the job's dist_file path,
# and generation 1's coordinator starts 5 s late (tr_slow_coordinator_bin), so gen-1 workers
# certainly find the stale file first; they must refuse it and register with the new one.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kit_lib.sh"
source "$(dirname "$0")/trainer_lib.sh"
tr_require

# world 2, batch 16: 1024 steps per epoch, so that the USR1 (sent at step >= 60 and forwarded by
# Slurm in a fraction of a second) lands well inside epoch 0, not in its last 10 steps (the stop
# is agreed every 10 steps and at each epoch start: a stop in the last 10 steps is at the boundary)
RQ_DATA=${RQ_DATA:-synthetic:32768x1x8x8:10}
RQ_SEED=7

job_restarts_is() { [[ "$(job_field "$1" Restarts)" == "$2" ]]; }

body() {
  local w=$T_WORK/rq ref=$T_WORK/ref slow=$T_WORK/slowbin job df rc
  mkdir -p "$w" "$ref"
  tr_slow_coordinator_bin "$slow" || fail "cannot prepare $slow"
  local flags=(--backend gloo --data "$RQ_DATA" --arch "${TR_ARCH:-mlp}" --epochs 2 --batch-size 16 --lr 0.1
               --seed "$RQ_SEED" --print-freq 100 --workers 0 --heartbeat-timeout 5 --linger 0)

  note "uninterrupted reference run (srun, 2 nodes x 1 worker), in the background"
  srun --job-name=ref --chdir="$ref" -N2 --ntasks-per-node=1 --gres=gpu:1 "$TR_TRAINER" \
    --nprocs-per-node 1 "${flags[@]}" --checkpoint-dir "$ref/ckpt" >"$ref/out" 2>&1 &
  local ref_pid=$!

  note "multi-node.sbatch with the real trainer (gres gpu:1 per node -> world 2)"
  job=$(DDP_BIN_DIR=$slow DATA=$RQ_DATA EPOCHS=2 LR=0.1 SEED=$RQ_SEED PRINT_FREQ=100 \
        EXTRA_ARGS="--workers 0 --heartbeat-timeout 5" \
        tr_submit rq --gres=gpu:1 --cpus-per-task=1) || fail sbatch
  df=$w/dist_file.$job
  note "job $job; waiting for training (step >= 60) before USR1"
  wait_until 120 "job $job training" tr_step_at_least "$df" 60 ||
    { show_job "$job"; dump_file "$w/job.out"; fail "generation 0 never trained"; }
  note "at step $(tr_json_get "$(tr_status "$df")" step): scancel --signal=USR1 --batch $job"
  scancel --signal=USR1 --batch "$job" || fail "scancel --signal=USR1"

  wait_until 60 "job $job requeued (Restarts=1)" job_restarts_is "$job" 1 ||
    { show_job "$job"; dump_file "$w/job.out"; fail "job was not requeued"; }
  if [[ -e "$df" ]]; then note "generation 0 left its dist_file behind"; fi
  tr_write_dist_file "$df" "$job" 0
  note "planted a generation-0 dist_file of job $job at $df (state now $(job_field "$job" JobState))"

  wait_until 300 "job $job to end" job_done "$job" || { show_job "$job"; dump_file "$w/job.out"; fail "job did not end"; }
  local outcome; outcome="$(job_field "$job" JobState)/$(job_field "$job" Restarts)/$(job_field "$job" ExitCode)"
  note "job $job: $outcome"
  [[ "$outcome" == "COMPLETED/1/$DDP_EXIT_OK:0" ]] || { show_job "$job"; dump_file "$w/job.out"; dump_file "$df.coordinator.log"; fail "want COMPLETED/1/$DDP_EXIT_OK:0, got $outcome"; }

  expect_file_has "$w/job.out" 'gen 0\].*SIGUSR1'
  expect_file_has "$w/job.out" "gen 0\\].*step exited with code $DDP_EXIT_RESUMABLE "
  expect_file_has "$w/job.out" "gen 0\\].*stopped for requeue \\(exit $DDP_EXIT_RESUMABLE\\)"
  expect_file_has "$w/job.out" 'stopped at step [0-9]+'
  expect_file_has "$w/job.out" 'gen 1\].*training finished'
  # Mid-epoch resume: a non-zero sample offset inside the epoch.
  expect_file_has "$w/job.out" 'resuming from .*: epoch [01], step [0-9]+, [1-9][0-9]* samples of the epoch done'
  grep -E 'stopped at step|resuming from' "$w/job.out" | sed 's/^/    /'
  # Generation 1 registered both workers with its own coordinator despite the stale file.
  local regs; regs=$(grep -c 'registered .* pid .* node .* local rank' "$df.coordinator.log")
  ((regs == 2)) || { dump_file "$df.coordinator.log"; fail "gen 1: $regs registrations, want 2"; }
  expect_file_has "$df.coordinator.log" "job $job generation 1: waiting for 2 workers"
  expect_file_lacks "$w/job.out" '\[rank [0-9]+\] error:'
  # The coordinator got USR1 too (Slurm signals every process of the step) and stayed up for
  # the checkpoint commit and the ranks' reports.
  expect_file_lacks "$w/job.out" 'not committed|could not report'
  # Whichever came first, its own signal or rank 0's report of the stop, it says it got it.
  expect_file_has "$w/job.out" 'signal SIGUSR1: (checkpoint and stop|nothing more to do, the job is STOPPING)'
  [[ ! -e "$df" ]] || note "note: dist_file still present after the job"

  wait "$ref_pid"; rc=$?
  ((rc == DDP_EXIT_OK)) || { dump_file "$ref/out"; fail "reference run exit $rc"; }
  [[ -s "$ref/ckpt/final.pt" && -s "$w/checkpoints/$job/final.pt" ]] || fail "final.pt missing"
  note "comparing final weights: interrupted+resumed vs uninterrupted"
  tr_same_weights "$w/checkpoints/$job/final.pt" "$ref/ckpt/final.pt" ||
    { dump_file "$w/job.out"; fail "final weights differ from the uninterrupted run"; }
}

slurm_test_main "$@"
