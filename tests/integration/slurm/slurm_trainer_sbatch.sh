#!/usr/bin/env bash
# slurm_trainer_sbatch — the slurm/ sbatch templates with the REAL ddp-trainer (found through
# DDP_BIN_DIR, as a user would set it), CPU/Gloo via the templates' own variables (BACKEND,
# DATA, ARCH, EPOCHS, BATCH_SIZE, PRINT_FREQ, EXTRA_ARGS), submitted with `sbatch --wait`:
#   multi-node.sbatch            2 nodes x 2 workers (--gres=gpu:2)   world 4
#   single-node-multi-gpu.sbatch 1 node  x 2 workers (--gres=gpu:2)   world 2
#   task-per-gpu.sbatch          2 nodes x 2 tasks   (--gres=gpu:2)   world 4
# Each exits 0 (COMPLETED, not requeued), writes checkpoints/<job>/final.pt, and its
# coordinator log shows every worker registered.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kit_lib.sh"
source "$(dirname "$0")/trainer_lib.sh"
tr_require

# submit_wait NAME TEMPLATE SBATCH-OPTS...: sbatch --wait from $T_WORK/NAME; prints "job rc"
submit_wait() {
  local name=$1 template=$2; shift 2
  local w=$T_WORK/$name
  mkdir -p "$w"
  (cd "$w" && DDP_BIN_DIR=$TR_BIN BACKEND=gloo DATA=$TR_DATA ARCH=mlp EPOCHS=2 BATCH_SIZE=16 \
     PRINT_FREQ=20 EXTRA_ARGS="--workers 0 --heartbeat-timeout 5 --linger 0" \
     sbatch --wait --parsable --export=ALL --output="$w/job.out" --time=10 "$@" "$KIT/$template" \
       >"$w/sbatch.out" 2>&1; echo $? >"$w/sbatch.rc")
}

check_case() {  # check_case NAME WORLD
  local name=$1 world=$2 w=$T_WORK/$1 job rc
  job=$(head -1 "$w/sbatch.out" | tr -dc 0-9)
  rc=$(cat "$w/sbatch.rc")
  note "$name: job $job, sbatch --wait exit $rc, $(job_field "$job" JobState)/$(job_field "$job" Restarts)/$(job_field "$job" ExitCode)"
  ((rc == DDP_EXIT_OK)) || { cat "$w/sbatch.out"; show_job "$job"; dump_file "$w/job.out"; fail "$name: sbatch --wait exit $rc"; }
  [[ "$(job_field "$job" JobState)/$(job_field "$job" Restarts)" == COMPLETED/0 ]] || fail "$name: not COMPLETED/0"
  expect_file_has "$w/job.out" 'training finished'
  expect_file_has "$w/job.out" "$world workers \\(gloo backend"
  expect_file_has "$w/job.out" "final weights: $w/checkpoints/$job/final.pt"
  [[ -s "$w/checkpoints/$job/final.pt" ]] || fail "$name: no final.pt"
  local regs; regs=$(grep -c 'registered .* pid .* node .* local rank' "$w/dist_file.$job.coordinator.log")
  ((regs == world)) || { dump_file "$w/dist_file.$job.coordinator.log"; fail "$name: $regs registrations, want $world"; }
}

body() {
  note "multi-node.sbatch and single-node-multi-gpu.sbatch (in parallel)"
  submit_wait multi multi-node.sbatch --nodes=2 --gres=gpu:2 --cpus-per-task=1 &
  local p1=$!
  submit_wait single single-node-multi-gpu.sbatch --gres=gpu:2 --cpus-per-task=1 &
  local p2=$!
  wait "$p1" "$p2"
  check_case multi 4
  check_case single 2
  note "task-per-gpu.sbatch"
  submit_wait tpg task-per-gpu.sbatch --nodes=2 --ntasks-per-node=2 --gres=gpu:2 --cpus-per-task=1
  check_case tpg 4
  expect_file_has "$T_WORK/tpg/job.out" 'slurm task-per-worker'
}

slurm_test_main "$@"
