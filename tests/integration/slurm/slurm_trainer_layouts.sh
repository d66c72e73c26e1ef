#!/usr/bin/env bash
# slurm_trainer_layouts — the REAL ddp-trainer under srun on the 2-node cluster, both launch
# layouts, world size 4, CPU/Gloo:
#   task per node:   srun -N2 --ntasks-per-node=1 ddp-trainer --nprocs-per-node 2
#   task per worker: srun -N2 --ntasks-per-node=2 ddp-trainer
# Each trains to completion (exit 0, final.pt written, 4 registrations in the coordinator log);
# while it runs, `ddpctl status --json` lists every rank exactly once with
# rank = node * 2 + local rank (the recipe's numbering).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/trainer_lib.sh"
tr_require
# 256 steps per epoch at world 4: long enough to catch the job RUNNING in ddpctl status.
TR_FLAGS=(--backend gloo --data synthetic:16384x1x8x8:10 --arch mlp --batch-size 16 --workers 0
          --epochs 2 --print-freq 100 --heartbeat-timeout 5)

# run_layout NAME SRUN-OPTS... -- TRAINER-OPTS...
run_layout() {
  local name=$1; shift
  local sopts=() topts=() w=$T_WORK/$name job rc j
  while (($#)) && [[ "$1" != -- ]]; do sopts+=("$1"); shift; done
  shift
  topts=("$@")
  mkdir -p "$w"
  note "$name: srun ${sopts[*]} ddp-trainer ${topts[*]}"
  srun --job-name="$name" --chdir="$w" "${sopts[@]}" "$TR_TRAINER" "${TR_FLAGS[@]}" \
    --checkpoint-dir "$w/ckpt" "${topts[@]}" >"$w/out" 2>&1 &
  local srun_pid=$!
  wait_eval 30 "job $name to get an id" '[[ -n "$(squeue -h -n "$name" -o %i)" ]]' || { cat "$w/out"; fail "$name: no job"; }
  job=$(squeue -h -n "$name" -o %i | head -1)
  local df=$w/dist_file.$job
  if wait_until 90 "$name RUNNING in ddpctl status" tr_state_is "$df" RUNNING; then
    j=$(tr_status "$df")
    tr_check_ranks "$j" 4 2 || { cat "$w/out"; fail "$name: rank table wrong"; }
  else
    kill "$srun_pid" 2>/dev/null; wait "$srun_pid"; dump_file "$w/out"; dump_file "$df.coordinator.log"
    fail "$name: never RUNNING"
  fi
  wait "$srun_pid"; rc=$?
  note "$name: job $job srun exit $rc"
  ((rc == DDP_EXIT_OK)) || { dump_file "$w/out"; dump_file "$df.coordinator.log"; fail "$name: srun exit $rc, want 0"; }
  [[ -s "$w/ckpt/final.pt" ]] || { dump_file "$w/out"; fail "$name: no final.pt"; }
  local regs; regs=$(grep -c 'registered .* pid .* node .* local rank' "$df.coordinator.log")
  ((regs == 4)) || { dump_file "$df.coordinator.log"; fail "$name: $regs registrations in the coordinator log, want 4"; }
  # Both nodes took part: registrations from node 0 and node 1, two local ranks each.
  local n l
  for n in 0 1; do for l in 0 1; do
    grep -qE "registered .* node $n local rank $l " "$df.coordinator.log" ||
      { dump_file "$df.coordinator.log"; fail "$name: no registration of node $n local rank $l"; }
  done; done
  [[ ! -e "$df" ]] || note "$name: note: dist_file still present after the job ($df)"
}

body() {
  run_layout per-node -N2 --ntasks-per-node=1 -- --nprocs-per-node 2
  expect_mode per-node "slurm task-per-node"
  run_layout per-worker -N2 --ntasks-per-node=2 --
  expect_mode per-worker "slurm task-per-worker"
}

expect_mode() {
  grep -qF "$2" "$T_WORK/$1/out" || { dump_file "$T_WORK/$1/out"; fail "$1: launcher did not say '$2'"; }
}

slurm_test_main "$@"
