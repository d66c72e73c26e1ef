#!/usr/bin/env bash
# slurm_kit_requeue — the sbatch templates' stop/requeue logic (slurm/lib/requeue.sh) on a real
# 2-node cluster, with tests/integration/slurm/stub-trainer.sh standing in for ddp-trainer:
#   multi-node.sbatch: USR1 to the batch shell -> forwarded to every task -> resumable exit -> requeue
#     -> generation 1 (SLURM_RESTART_COUNT=1, --resume) finishes -> COMPLETED, one log file.
#   single-node-multi-gpu.sbatch: success (no requeue), failure (exit 1, no requeue),
#     DDP_REQUEUE=never (a resumable exit ends the job), a trainer killed by USR1 before its handler is
#     installed (still requeued), scancel (TERM: stopped, not requeued).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kit_lib.sh"

case_multi_node_requeue() {
  note "multi-node.sbatch: USR1 -> exit $DDP_EXIT_RESUMABLE -> requeue -> generation 1 finishes"
  local c=multi job s w=$T_WORK/multi
  job=$(kit_submit $c multi-node.sbatch --nodes=2 --gres=gpu:2 --cpus-per-task=1 --time=10) || fail "sbatch"
  wait_until 60 "2 tasks of generation 0 ready" have_n_files "$w/stub/gen0.task*.ready" 2 ||
    { dump_case $c "$job"; fail "generation 0 did not start"; }
  scancel --signal=USR1 --batch "$job" || fail "scancel --signal=USR1 --batch"
  wait_until 120 "job $job COMPLETED after requeue" job_state_is "$job" COMPLETED ||
    { dump_case $c "$job"; fail "job did not complete"; }
  [[ "$(job_field "$job" Restarts)" == 1 ]] || { dump_case $c "$job"; fail "Restarts != 1"; }
  for t in 0 1; do
    expect_file_has "$w/stub/gen0.task$t.result" '^stopped by USR1 \(workers: 2, worker rc 0\)'
    expect_file_has "$w/stub/gen1.task$t.result" '^finished$'
    expect_file_lacks "$w/stub/gen0.task$t" '--resume'
    expect_file_has "$w/stub/gen1.task$t" 'args: .*--resume'
    for s in 0 1; do
      expect_file_has "$w/stub/gen$s.task$t" "args: --dist-file $w/dist_file.$job --nprocs-per-node 2 "
      expect_file_has "$w/stub/gen$s.task$t" "--checkpoint-dir $w/checkpoints/$job( |$)"
      expect_file_has "$w/stub/gen$s.task$t" "procid=$t localid=0 ntasks=2 gpus_on_node=2 cvd=0,1"
    done
  done
  have_n_files "$w/stub/gen2.*" 0 || fail "a third generation ran"
  [[ -d "$w/checkpoints/$job" ]] || fail "checkpoint dir not created"
  # One log, both generations (--open-mode=append), and the kit's own messages.
  expect_file_has "$w/job.out" 'gen 0\].*SIGUSR1'
  expect_file_has "$w/job.out" "gen 0\\].*stopped for requeue \\(exit $DDP_EXIT_RESUMABLE\\): scontrol requeue"
  expect_file_has "$w/job.out" 'gen 1\].*training finished'
}

case_single_node_paths() {
  local c job w
  note "single-node-multi-gpu.sbatch: success -> COMPLETED, no requeue"
  c=ok w=$T_WORK/ok
  job=$(STUB_STOP_GENERATIONS=0 kit_submit $c single-node-multi-gpu.sbatch --gres=gpu:2 --cpus-per-task=2 --time=5) || fail sbatch
  wait_until 60 "job $job to end" job_done "$job" || { dump_case $c "$job"; fail "did not end"; }
  [[ "$(job_field "$job" JobState)/$(job_field "$job" Restarts)/$(job_field "$job" ExitCode)" == "COMPLETED/0/$DDP_EXIT_OK:0" ]] ||
    { dump_case $c "$job"; fail "success case: want COMPLETED/0/$DDP_EXIT_OK:0"; }
  expect_file_has "$w/stub/gen0.task0" "args: --dist-file $w/dist_file.$job --nprocs-per-node 2 --backend auto"
  expect_file_has "$w/stub/gen0.task0" "procid=0 localid=0 ntasks=1 gpus_on_node=2"

  note "single-node-multi-gpu.sbatch: trainer fails (exit 1) -> FAILED 1, no requeue"
  c=bad w=$T_WORK/bad
  job=$(STUB_STOP_GENERATIONS=0 STUB_FINAL_EXIT=$DDP_EXIT_FAILED kit_submit $c single-node-multi-gpu.sbatch --gres=gpu:2 --cpus-per-task=2 --time=5) || fail sbatch
  wait_until 60 "job $job to end" job_done "$job" || { dump_case $c "$job"; fail "did not end"; }
  [[ "$(job_field "$job" JobState)/$(job_field "$job" Restarts)/$(job_field "$job" ExitCode)" == "FAILED/0/$DDP_EXIT_FAILED:0" ]] ||
    { dump_case $c "$job"; fail "failure case: want FAILED/0/$DDP_EXIT_FAILED:0"; }

  note "single-node-multi-gpu.sbatch: DDP_REQUEUE=never + USR1 -> exit $DDP_EXIT_RESUMABLE, no requeue"
  c=never w=$T_WORK/never
  job=$(DDP_REQUEUE=never kit_submit $c single-node-multi-gpu.sbatch --gres=gpu:2 --cpus-per-task=2 --time=5) || fail sbatch
  wait_until 60 "generation 0 ready" have_n_files "$w/stub/gen0.task0.ready" 1 || { dump_case $c "$job"; fail "no start"; }
  scancel --signal=USR1 --batch "$job"
  wait_until 60 "job $job to end" job_done "$job" || { dump_case $c "$job"; fail "did not end"; }
  [[ "$(job_field "$job" JobState)/$(job_field "$job" Restarts)/$(job_field "$job" ExitCode)" == "FAILED/0/$DDP_EXIT_RESUMABLE:0" ]] ||
    { dump_case $c "$job"; fail "never case: want FAILED/0/$DDP_EXIT_RESUMABLE:0"; }
  expect_file_has "$w/stub/gen0.task0.result" '^stopped by USR1'

  note "single-node-multi-gpu.sbatch: trainer without a USR1 handler dies of it -> still requeued"
  c=notrap w=$T_WORK/notrap
  job=$(STUB_NO_TRAP=1 kit_submit $c single-node-multi-gpu.sbatch --gres=gpu:2 --cpus-per-task=2 --time=5) || fail sbatch
  wait_until 60 "generation 0 ready" have_n_files "$w/stub/gen0.task0.ready" 1 || { dump_case $c "$job"; fail "no start"; }
  scancel --signal=USR1 --batch "$job"
  wait_until 90 "job $job COMPLETED after requeue" job_state_is "$job" COMPLETED || { dump_case $c "$job"; fail "did not complete"; }
  [[ "$(job_field "$job" Restarts)" == 1 ]] || { dump_case $c "$job"; fail "notrap case: Restarts != 1"; }
  expect_file_has "$w/job.out" "gen 0\\].*step exited with code $((128 + $(kill -l USR1)))"
  expect_file_has "$w/job.out" 'gen 0\].*died of SIGUSR1'
  expect_file_has "$w/stub/gen1.task0.result" '^finished$'

  note "single-node-multi-gpu.sbatch: scancel (TERM) -> trainer stops, job CANCELLED, not requeued"
  c=cancel w=$T_WORK/cancel
  job=$(kit_submit $c single-node-multi-gpu.sbatch --gres=gpu:2 --cpus-per-task=2 --time=5) || fail sbatch
  wait_until 60 "generation 0 ready" have_n_files "$w/stub/gen0.task0.ready" 1 || { dump_case $c "$job"; fail "no start"; }
  scancel "$job"
  wait_until 60 "job $job to end" job_done "$job" || { dump_case $c "$job"; fail "did not end"; }
  [[ "$(job_field "$job" JobState)/$(job_field "$job" Restarts)" == CANCELLED/0 ]] ||
    { dump_case $c "$job"; fail "cancel case: want CANCELLED/0"; }
  wait_eval 20 "no process left in $w" '[[ -z "$(procs_in "$w")" ]]' || fail "processes left after scancel"
  sleep 3
  [[ "$(job_field "$job" JobState)" == CANCELLED ]] || { dump_case $c "$job"; fail "cancelled job came back"; }
}

body() {
  case_multi_node_requeue
  case_single_node_paths
}

slurm_test_main "$@"
