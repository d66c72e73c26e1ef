#!/usr/bin/env bash
# slurm_trainer_stale_dist_file — the REAL ddp-trainer (2 nodes x 1 worker, CPU/Gloo) started
# while a stale dist_file lies at its rendezvous path still trains: the workers refuse the
# foreign file (job id check) and register with their own coordinator, which replaces it.
# The coordinator is made to start 5 s late (tr_slow_coordinator_bin), so the workers certainly
# read the stale file first. Cases:
#   same path:      a held job's default path dist_file.<job> pre-filled with another job's file
#   --dist-file:    the flag points at a file left by another (dead) job
#   shared, live:   the flag points at the dist_file of another job that is RUNNING right now:
#                   B is refused (exit 2, naming job A) and touches nothing of A's (dist_file,
#                   journal, coordinator log); A is still training and is stopped through its
#                   own coordinator (exit 3), with only its own 2 workers registered.
# (A stale file of an earlier generation of the same job: slurm_trainer_requeue.)
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kit_lib.sh"
source "$(dirname "$0")/trainer_lib.sh"
tr_require

SLOW=""
two_registrations() {  # two_registrations COORDINATOR_LOG JOB
  local regs; regs=$(grep -c 'registered .* pid .* node .* local rank' "$1")
  ((regs == 2)) || { dump_file "$1"; fail "$1: $regs registrations, want 2"; }
  grep -q "job $2 generation 0: waiting for 2 workers" "$1" || { dump_file "$1"; fail "$1 is not job $2's"; }
}

case_same_path() {
  local w=$T_WORK/same job rc
  mkdir -p "$w"
  note "same path: held job, its dist_file.<job> pre-filled with job 424242's file"
  job=$(sbatch --parsable --hold -N2 --ntasks-per-node=1 --chdir="$w" -o "$w/out" \
        --wrap "srun $SLOW/ddp-trainer --nprocs-per-node 1 ${TR_FLAGS[*]} --checkpoint-dir $w/ckpt") || fail sbatch
  tr_write_dist_file "$w/dist_file.$job" 424242 0
  scontrol release "$job" || fail "scontrol release"
  wait_until 150 "job $job to end" job_done "$job" || { show_job "$job"; dump_file "$w/out"; fail "did not end"; }
  [[ "$(job_field "$job" JobState)/$(job_field "$job" ExitCode)" == "COMPLETED/$DDP_EXIT_OK:0" ]] ||
    { show_job "$job"; dump_file "$w/out"; dump_file "$w/dist_file.$job.coordinator.log"; fail "want COMPLETED/$DDP_EXIT_OK:0"; }
  two_registrations "$w/dist_file.$job.coordinator.log" "$job"
  [[ -s "$w/ckpt/final.pt" ]] || fail "no final.pt"
  expect_file_has "$w/out" 'final weights'
}

case_flag_dead() {
  local w=$T_WORK/flag rc job
  mkdir -p "$w"
  tr_write_dist_file "$w/old_dist_file" 434343 5
  note "--dist-file pointing at a file of job 434343 (dead coordinator)"
  srun --job-name=flagdead --chdir="$w" -N2 --ntasks-per-node=1 "$SLOW/ddp-trainer" --nprocs-per-node 1 \
    "${TR_FLAGS[@]}" --dist-file "$w/old_dist_file" >"$w/out" 2>&1; rc=$?
  ((rc == DDP_EXIT_OK)) || { dump_file "$w/out"; dump_file "$w/old_dist_file.coordinator.log"; fail "srun exit $rc"; }
  job=$(sed -n 's/^.*job \([0-9]*\) generation 0: waiting.*$/\1/p' "$w/old_dist_file.coordinator.log" | head -1)
  [[ -n "$job" && "$job" != 434343 ]] || { dump_file "$w/old_dist_file.coordinator.log"; fail "coordinator not of this job"; }
  two_registrations "$w/old_dist_file.coordinator.log" "$job"
}

case_shared_live() {
  local w=$T_WORK/shared a_pid b_rc a_rc ja
  mkdir -p "$w/a" "$w/b"
  note "shared: job A runs with --dist-file $w/shared; job B starts with the same file"
  srun --job-name=sharedA --chdir="$w/a" -N2 --ntasks-per-node=1 "$TR_TRAINER" --nprocs-per-node 1 \
    --backend gloo --data synthetic:65536x1x8x8:10 --arch mlp --batch-size 16 --workers 0 --epochs 100 \
    --print-freq 500 --heartbeat-timeout 5 --checkpoint-dir "$w/a/ckpt" --dist-file "$w/shared" \
    >"$w/a/out" 2>&1 &
  a_pid=$!
  wait_until 90 "job A RUNNING" tr_state_is "$w/shared" RUNNING || { dump_file "$w/a/out"; fail "A never RUNNING"; }
  ja=$(tr_json_get "$(tr_status "$w/shared")" job_id)
  cp "$w/shared" "$w/a/dist_file"
  cp "$w/shared.journal" "$w/a/journal"
  srun --job-name=sharedB --chdir="$w/b" -N2 --ntasks-per-node=1 "$SLOW/ddp-trainer" --nprocs-per-node 1 \
    "${TR_FLAGS[@]}" --dist-file "$w/shared" >"$w/b/out" 2>&1; b_rc=$?
  note "job A = $ja; B exit $b_rc"
  ((b_rc == DDP_EXIT_USAGE)) || { dump_file "$w/b/out"; fail "job B (shared file of a live job) exit $b_rc, want $DDP_EXIT_USAGE"; }
  grep -q "belongs to a job that is still running (job $ja " "$w/b/out" || { dump_file "$w/b/out"; fail "B's refusal does not name job A"; }
  cmp -s "$w/shared" "$w/a/dist_file" || fail "job B replaced A's dist_file"
  cmp -s "$w/shared.journal" "$w/a/journal" || fail "job B touched A's journal"
  kill -0 "$a_pid" 2>/dev/null || { dump_file "$w/a/out"; fail "job A ended"; }
  tr_state_is "$w/shared" RUNNING || { dump_file "$w/a/out"; fail "job A's coordinator does not answer RUNNING after B"; }
  "$TR_CTL" --dist-file "$w/shared" stop || { dump_file "$w/a/out"; fail "ddpctl stop of job A failed"; }
  wait "$a_pid"; a_rc=$?
  note "A stopped by ddpctl: exit $a_rc"
  ((a_rc == DDP_EXIT_RESUMABLE)) || { dump_file "$w/a/out"; fail "job A exit $a_rc (want $DDP_EXIT_RESUMABLE)"; }
  compgen -G "$w/a/ckpt/*.pt" >/dev/null || fail "job A's stop wrote no checkpoint"
  two_registrations "$w/shared.coordinator.log" "$ja"
}

body() {
  SLOW=$T_WORK/slowbin
  tr_slow_coordinator_bin "$SLOW" || fail "cannot prepare $SLOW"
  case_same_path
  case_flag_dead
  case_shared_live
}

slurm_test_main "$@"
