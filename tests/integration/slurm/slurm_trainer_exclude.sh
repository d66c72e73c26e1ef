#!/usr/bin/env bash
# slurm_trainer_exclude — --straggler-action exclude on the real cluster. The real ddp-trainer
# runs through slurm/multi-node.sbatch on ONE node (2 workers on its fake gres gpu:2, CPU/Gloo).
# Rank 1 is slowed to about a third of its speed by a SIGSTOP/SIGCONT duty cycle (stopped 100 ms
# of every 150 ms; with two ranks a stop that lands in its allreduce counts as communication, so
# half speed scores near the threshold on a loaded machine): the coordinator names it
# a straggler and writes its Slurm node name to <dist_file>.exclude, which `ddpctl stragglers
# --exclude-list` prints. `scancel --signal=USR1 --batch` then checkpoints and stops the job; the
# kit requeues it and sets the requeued job's ExcNodeList from that list, so generation 1 is
# allocated the other node, resumes from the checkpoint and finishes.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kit_lib.sh"
source "$(dirname "$0")/trainer_lib.sh"
tr_require

# The CNN (its steps are mostly compute, where a stopped worker's time then shows), world 2,
# batch 16: 1024 steps per epoch, so that the slowdown, the straggler window and the stop all
# happen inside epoch 0.
EX_DATA=${EX_DATA:-synthetic:32768x1x8x8:10}
export TR_ARCH=cnn

job_restarts_is() { [[ "$(job_field "$1" Restarts)" == "$2" ]]; }
running_elsewhere() {  # running_elsewhere JOB NODE: RUNNING on a node list without NODE
  job_state_is "$1" RUNNING && [[ -n "$(job_field "$1" NodeList)" && "$(job_field "$1" NodeList)" != "$2" ]]
}

body() {
  local w=$T_WORK/ex job df node0 node1 pid duty list
  job=$(DATA=$EX_DATA EPOCHS=2 PRINT_FREQ=500 \
        EXTRA_ARGS="--workers 0 --heartbeat-timeout 5 --straggler-action exclude --straggler-window 3" \
        tr_submit ex --nodes=1 --gres=gpu:2 --cpus-per-task=1) || fail sbatch
  df=$w/dist_file.$job
  note "job $job; waiting for training (step >= 100)"
  wait_until 120 "job $job training" tr_step_at_least "$df" 100 ||
    { show_job "$job"; dump_file "$w/job.out"; fail "generation 0 never trained"; }
  node0=$(job_field "$job" NodeList)
  pid=$(tr_status "$df" | python3 -c 'import json,sys; print(next(r["pid"] for r in json.load(sys.stdin)["ranks"] if r["rank"] == 1))') ||
    fail "no pid for rank 1"
  note "generation 0 on $node0; slowing rank 1 (pid $pid) to about a third of its speed"
  (while kill -STOP "$pid" 2>/dev/null; do sleep 0.1; kill -CONT "$pid" 2>/dev/null; sleep 0.05; done) &
  duty=$!
  wait_until 60 "the exclude list" test -s "$df.exclude" ||
    { kill "$duty"; kill -CONT "$pid"; tr_status "$df"; dump_file "$df.coordinator.log"; fail "no exclude list"; }
  kill "$duty"; wait "$duty" 2>/dev/null; kill -CONT "$pid" 2>/dev/null
  dump_file "$df.exclude"
  expect_file_has "$df.exclude" "^node=$node0 section=(data|compute|optimizer) relative_score=0\.[0-9]+ time=[0-9]+ job=$job\$"
  expect_file_has "$df.coordinator.log" "rank 1 .* is a straggler: .*--straggler-action exclude"
  expect_file_has "$df.coordinator.log" "--straggler-action exclude: node $node0 \(node 0.*\) goes on the exclude list"
  list=$("$TR_CTL" --dist-file "$df" stragglers --exclude-list) || fail "ddpctl stragglers --exclude-list failed"
  [[ "$list" == "$node0" ]] || fail "ddpctl stragglers --exclude-list printed '$list', want '$node0'"

  note "scancel --signal=USR1 --batch $job: checkpoint, stop, requeue"
  scancel --signal=USR1 --batch "$job" || fail "scancel --signal=USR1"
  wait_until 60 "job $job requeued (Restarts=1)" job_restarts_is "$job" 1 ||
    { show_job "$job"; dump_file "$w/job.out"; fail "job was not requeued"; }
  wait_until 120 "generation 1 running on another node than $node0" running_elsewhere "$job" "$node0" ||
    { show_job "$job"; dump_file "$w/job.out"; fail "generation 1 did not run elsewhere"; }
  node1=$(job_field "$job" NodeList)
  note "generation 1 runs on $node1 (ExcNodeList=$(job_field "$job" ExcNodeList))"
  [[ "$(job_field "$job" ExcNodeList)" == "$node0" ]] || { show_job "$job"; fail "ExcNodeList is not $node0"; }
  wait_until 300 "job $job to end" job_done "$job" || { show_job "$job"; dump_file "$w/job.out"; fail "job did not end"; }
  local outcome; outcome="$(job_field "$job" JobState)/$(job_field "$job" Restarts)/$(job_field "$job" ExitCode)"
  note "job $job: $outcome"
  [[ "$outcome" == "COMPLETED/1/$DDP_EXIT_OK:0" ]] ||
    { show_job "$job"; dump_file "$w/job.out"; fail "want COMPLETED/1/$DDP_EXIT_OK:0, got $outcome"; }
  expect_file_has "$w/job.out" "gen 0\\].*the requeued job excludes node\\(s\\) $node0 \\(stragglers"
  expect_file_has "$w/job.out" 'resuming from .*: epoch [01], step [0-9]+'
  expect_file_has "$w/job.out" 'gen 1\].*training finished'
}

slurm_test_main "$@"
