#!/usr/bin/env bash
# slurm_trainer_suspend — `scontrol suspend` of a running REAL ddp-trainer batch job
# (slurm/multi-node.sbatch, 2 nodes x 1 worker, world 2, CPU/Gloo) for longer than its heartbeat
# timeout, then `scontrol resume`: Slurm stops every process of the job (SIGSTOP), the
# coordinator included, and continues them; the job carries on and ends COMPLETED 0:0. The
# coordinator logs the time it was not running, and no rank is declared lost.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kit_lib.sh"
source "$(dirname "$0")/trainer_lib.sh"
tr_require

SUSPEND_S=${SUSPEND_S:-12}  # > 2 x --heartbeat-timeout
# 2,048 steps (world 2, batch 16): the job must still be training when the test looks; 256 steps
# of the MLP ended in 1.3 s on an idle machine, before the first status poll saw step 20.

body() {
  local w=$T_WORK/susp job df step
  job=$(DATA=synthetic:65536x1x8x8:10 EPOCHS=1 PRINT_FREQ=500 \
        EXTRA_ARGS="--workers 0 --heartbeat-timeout 5 --no-eval" \
        tr_submit susp --gres=gpu:1 --cpus-per-task=1) || fail sbatch
  df=$w/dist_file.$job
  note "job $job; waiting for training (step >= 20) before the suspend"
  wait_until 120 "job $job training" tr_step_at_least "$df" 20 ||
    { show_job "$job"; dump_file "$w/job.out"; fail "never trained"; }
  step=$(tr_json_get "$(tr_status "$df")" step)
  note "at step $step: scontrol suspend $job for ${SUSPEND_S}s"
  scontrol suspend "$job" || fail "scontrol suspend"
  wait_until 10 "job $job SUSPENDED" job_state_is "$job" SUSPENDED || { show_job "$job"; fail "not suspended"; }
  sleep "$SUSPEND_S"
  note "scontrol resume $job"
  scontrol resume "$job" || fail "scontrol resume"
  wait_until 300 "job $job to end" job_done "$job" || { show_job "$job"; dump_file "$w/job.out"; fail "job did not end"; }
  local outcome; outcome="$(job_field "$job" JobState)/$(job_field "$job" ExitCode)"
  note "job $job: $outcome"
  [[ "$outcome" == "COMPLETED/$DDP_EXIT_OK:0" ]] ||
    { show_job "$job"; dump_file "$w/job.out"; dump_file "$df.coordinator.log"; fail "want COMPLETED/$DDP_EXIT_OK:0, got $outcome"; }
  expect_file_has "$df.coordinator.log" 'coordinator was not running for'
  grep -q 'lost' "$df.coordinator.log" && { dump_file "$df.coordinator.log"; fail "a rank was declared lost"; }
  expect_file_has "$w/job.out" 'done: 1 epochs'
  { grep 'not running for' "$df.coordinator.log"; grep 'done:' "$w/job.out"; } | sed 's/^/    | /'
}

slurm_test_main "$@"
