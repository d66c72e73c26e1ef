#!/usr/bin/env bash
# slurm_kit_time_limit — the real time-limit warning path of task-per-gpu.sbatch on a 2-node
# cluster: Slurm itself sends --signal=B:USR1@<secs> to the batch shell before the time limit,
# slurm/lib/requeue.sh forwards it to all 4 tasks (2 nodes x 2 tasks, one per fake GPU), the stub
# trainers exit resumable, the job requeues itself and generation 1 finishes. Takes about a minute,
# because Slurm checks time limits only every ~30 s.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kit_lib.sh"

body() {
  local c=tl w=$T_WORK/tl job t0 t
  note "task-per-gpu.sbatch with --time=2 --signal=B:USR1@80 (signal due ~40 s after start)"
  t0=$(date +%s)
  job=$(STUB_WAIT=150 kit_submit $c task-per-gpu.sbatch --nodes=2 --ntasks-per-node=2 --gres=gpu:2 \
        --cpus-per-task=1 --time=2 --signal=B:USR1@80) || fail "sbatch"
  wait_until 60 "4 tasks of generation 0 ready" have_n_files "$w/stub/gen0.task*.ready" 4 ||
    { dump_case $c "$job"; fail "generation 0 did not start"; }
  wait_until 150 "job $job COMPLETED after the time-limit signal and a requeue" job_state_is "$job" COMPLETED ||
    { dump_case $c "$job"; fail "job did not complete"; }
  note "signal + requeue + generation 1 took $(( $(date +%s) - t0 ))s"
  [[ "$(job_field "$job" Restarts)" == 1 ]] || { dump_case $c "$job"; fail "Restarts != 1"; }
  for t in 0 1 2 3; do
    expect_file_has "$w/stub/gen0.task$t.result" '^stopped by USR1 \(workers: 1, worker rc 0\)'
    expect_file_has "$w/stub/gen1.task$t.result" '^finished$'
    expect_file_has "$w/stub/gen0.task$t" "args: --dist-file $w/dist_file.$job --nprocs-per-node 1 "
    expect_file_has "$w/stub/gen0.task$t" "procid=$t localid=$((t % 2)) ntasks=4 gpus_on_node=2 cvd=0,1"
    expect_file_has "$w/stub/gen1.task$t" 'args: .*--resume'
  done
  expect_file_has "$w/job.out" 'gen 0\].*SIGUSR1'
  expect_file_has "$w/job.out" 'gen 1\].*training finished'
}

slurm_test_main "$@"
