#!/usr/bin/env bash
# slurm_trainer_node0_lost — node 0 lost as a whole, coordinator included, on a 3-node test Slurm
# cluster: slurm/multi-node.sbatch with SPARE_NODES=1 on 3 nodes trains on nodes 0 and 1 (1 worker
# each, world 2, CPU/Gloo) while node 2 stands by. Every process of node 0's task (the ddp-trainer
# task 0, its ddp-coordinator child and its worker) is SIGKILLed mid-training; the step goes on
# (srun --no-kill --kill-on-bad-exit=0). Node 1's task, the coordinator's standby, takes the job
# over as coordinator epoch 1 from the journal beside the dist_file, the spare takes node 0's rank
# (rank 0, which writes final.pt), no checkpoint file is read, the job ends COMPLETED 0:0, and its
# final.pt is bitwise equal to an uninterrupted run with the same flags (srun on 2 nodes, in the
# background).
export SLURM_HARNESS_NODES=3
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kit_lib.sh"
source "$(dirname "$0")/trainer_lib.sh"
tr_require

N0_DATA=${N0_DATA:-synthetic:8192x1x8x8:10}   # world 2, batch 16: 256 steps per epoch
N0_SEED=11

# all_gone PID...: none of them runs (gone, or a zombie its parent has not reaped yet)
all_gone() {
  local p
  for p; do [[ -d /proc/$p && "$(ps -o stat= -p "$p")" != Z* ]] && return 1; done
  return 0
}

body() {
  local w=$T_WORK/n0 ref=$T_WORK/ref job df j rank0_pid task_pid pgid rc step p victims=()
  mkdir -p "$w" "$ref"
  local flags=(--backend gloo --data "$N0_DATA" --arch mlp --epochs 2 --batch-size 16 --lr 0.1
               --seed "$N0_SEED" --print-freq 50 --workers 0 --heartbeat-timeout 5 --linger 0)

  note "uninterrupted reference run (srun, 2 nodes x 1 worker), in the background"
  srun --job-name=ref --chdir="$ref" -N2 --ntasks-per-node=1 --gres=gpu:1 "$TR_TRAINER" \
    --nprocs-per-node 1 "${flags[@]}" --checkpoint-dir "$ref/ckpt" >"$ref/out" 2>&1 &
  local ref_pid=$!

  note "multi-node.sbatch, SPARE_NODES=1 on 3 nodes (gres gpu:1 per node -> world 2 + 1 spare)"
  job=$(SPARE_NODES=1 DATA=$N0_DATA EPOCHS=2 LR=0.1 SEED=$N0_SEED PRINT_FREQ=50 \
        EXTRA_ARGS="--workers 0 --heartbeat-timeout 5 --failover-timeout 2 --coordinator-grace 30" \
        tr_submit n0 --nodes=3 --gres=gpu:1 --cpus-per-task=1) || fail sbatch
  df=$w/dist_file.$job
  wait_until 120 "job $job training" tr_step_at_least "$df" 40 ||
    { show_job "$job"; dump_file "$w/job.out"; fail "never trained"; }
  wait_eval 30 "ddpctl status: 1 spare node" '[[ "$(tr_json_get "$(tr_status "$df")" spare_nodes)" == 1 ]]' ||
    { dump_file "$w/job.out"; dump_file "$df.coordinator.log"; fail "the spare never stood by"; }
  j=$(tr_status "$df")
  step=$(tr_json_get "$j" step)
  rank0_pid=$(python3 -c 'import json,sys; print([r["pid"] for r in json.loads(sys.argv[1])["ranks"] if r["rank"]==0][0])' "$j")
  task_pid=$(ps -o ppid= -p "$rank0_pid" | tr -d ' ')
  [[ -n "$task_pid" ]] && grep -q ddp-trainer "/proc/$task_pid/cmdline" 2>/dev/null ||
    fail "rank 0 (pid $rank0_pid) has no ddp-trainer task as its parent ('$task_pid')"
  [[ "$(env_of "$task_pid" SLURM_JOB_ID)" == "$job" && "$(env_of "$task_pid" SLURM_PROCID)" == 0 ]] ||
    fail "pid $task_pid is not task 0 of job $job (SLURM_JOB_ID=$(env_of "$task_pid" SLURM_JOB_ID) SLURM_PROCID=$(env_of "$task_pid" SLURM_PROCID))"
  # Node 0's task: the launcher, every process below it (coordinator, worker) and its process
  # group, gathered before any dies (a killed launcher's children are re-parented).
  pgid=$(ps -o pgid= -p "$task_pid" | tr -d ' ')
  mapfile -t victims < <({ descendants "$task_pid"; ps -o pid= -g "$pgid"; } | tr -d ' ' | sort -un)
  local names=""
  for p in "${victims[@]}"; do names+=" $p:$(ps -o comm= -p "$p")"; done
  [[ "$names" == *ddp-coordinato* ]] ||
    fail "no ddp-coordinator among node 0's processes:$names"
  note "at step $step: kill -KILL every process of node 0's task (group $pgid):$names"
  kill -KILL -- "-$pgid" 2>/dev/null
  kill -KILL "${victims[@]}" 2>/dev/null
  wait_until 10 "node 0's processes gone" all_gone "${victims[@]}" ||
    fail "a process of node 0's task survived SIGKILL"

  wait_eval 60 "coordinator epoch 1 took over" 'grep -q "took over" "$df.coordinator.log.epoch1"' ||
    { dump_file "$w/job.out"; dump_file "$df.coordinator.log"; fail "node 1 never took the coordinator over"; }
  note "$(grep -m1 -o 'coordinator epoch 1 on .*' "$df.coordinator.log.epoch1")"

  wait_until 300 "job $job to end" job_done "$job" || { show_job "$job"; dump_file "$w/job.out"; fail "job did not end"; }
  local outcome; outcome="$(job_field "$job" JobState)/$(job_field "$job" ExitCode)"
  note "job $job: $outcome"
  [[ "$outcome" == "COMPLETED/$DDP_EXIT_OK:0" ]] ||
    { show_job "$job"; dump_file "$w/job.out"; dump_file "$df.coordinator.log.epoch1"; fail "want COMPLETED/$DDP_EXIT_OK:0, got $outcome"; }
  expect_file_has "$df.coordinator.log.epoch1" 'coordinator epoch 1 on [^ ]+ \(node 1\) took over'
  expect_file_has "$df.coordinator.log.epoch1" 'node 0 \(host [^,]+, ranks? 0\) lost with its coordinator'
  expect_file_has "$w/job.out" 'standby: coordinator epoch 0 on node 0 silent for'
  expect_file_has "$w/job.out" 'taking over node 0'
  expect_file_has "$w/job.out" 'but the job SUCCEEDED on the others'
  grep -hE 'silent for|took over|lost with its coordinator|taking over|SUCCEEDED' "$w/job.out" "$df.coordinator.log.epoch1" |
    sed 's/^/    | /' | head -8
  expect_file_lacks "$w/job.out" 'resuming from'
  ! compgen -G "$df.epoch*[0-9]" >/dev/null || fail "an epoch claim was left behind: $(compgen -G "$df.epoch*[0-9]")"

  wait "$ref_pid"; rc=$?
  ((rc == DDP_EXIT_OK)) || { dump_file "$ref/out"; fail "reference run exit $rc"; }
  [[ -s "$ref/ckpt/final.pt" && -s "$w/checkpoints/$job/final.pt" ]] || fail "final.pt missing"
  note "comparing final weights: node 0 lost (standby + spare) vs uninterrupted"
  tr_same_weights "$w/checkpoints/$job/final.pt" "$ref/ckpt/final.pt" ||
    { dump_file "$w/job.out"; fail "final weights differ from the uninterrupted run"; }
}

slurm_test_main "$@"
