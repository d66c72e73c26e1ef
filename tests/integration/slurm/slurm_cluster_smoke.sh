#!/usr/bin/env bash
# slurm_cluster_smoke — the harness and the Slurm mechanics the product relies on, on a real
# 2-node cluster (scripts/slurm-cluster.sh): task layout variables, sbatch --wait, scancel of a
# running step leaving no process behind, requeue from inside a job (SLURM_RESTART_COUNT), and
# USR1 delivery to a trap in the batch shell (scancel --signal=USR1 --batch), and a cluster start
# whose port another program took is retried on other ports.
source "$(dirname "$0")/lib.sh"

check_layout() {
  note "srun -N2 --ntasks-per-node=1"
  local out want
  out=$(srun -N2 --ntasks-per-node=1 bash -c 'echo "$SLURM_NODEID $SLURM_PROCID $SLURM_LOCALID $SLURM_NTASKS $SLURMD_NODENAME"' | sort) ||
    fail "srun -N2 failed"
  want=$'0 0 0 2 n1\n1 1 0 2 n2'
  [[ "$out" == "$want" ]] || fail "srun -N2 --ntasks-per-node=1 layout:"$'\n'"$out"$'\nwant:\n'"$want"
  note "srun -N2 --ntasks-per-node=2"
  out=$(srun -N2 --ntasks-per-node=2 bash -c 'echo "$SLURM_NODEID $SLURM_PROCID $SLURM_LOCALID $SLURM_NTASKS"' | sort) ||
    fail "srun -N2 --ntasks-per-node=2 failed"
  want=$'0 0 0 4\n0 1 1 4\n1 2 0 4\n1 3 1 4'
  [[ "$out" == "$want" ]] || fail "srun -N2 --ntasks-per-node=2 layout:"$'\n'"$out"$'\nwant:\n'"$want"
  note "srun --gres=gpu:2 (fake GPUs)"
  out=$(srun -N2 --ntasks-per-node=1 --gres=gpu:2 bash -c 'echo "$SLURM_GPUS_ON_NODE $CUDA_VISIBLE_DEVICES"' | sort -u) ||
    fail "srun --gres=gpu:2 failed"
  [[ "$out" == "2 0,1" ]] || fail "gres env: got '$out', want '2 0,1'"
}

check_sbatch_wait() {
  note "sbatch --wait"
  sbatch --wait -N2 --ntasks-per-node=1 -o wait.out --wrap 'srun hostname >/dev/null && echo batch-ok' >/dev/null ||
    fail "sbatch --wait job failed: $(cat wait.out 2>/dev/null)"
  grep -qx batch-ok wait.out || fail "sbatch --wait: no output: $(cat wait.out)"
}

check_scancel_step() {
  note "scancel of a running step"
  mkdir -p "$T_WORK/cancel"
  local job
  job=$(sbatch --parsable -N2 --ntasks-per-node=1 -D "$T_WORK/cancel" -o "$T_WORK/cancel.out" \
        --wrap 'srun bash -c "echo started > started.\$SLURM_PROCID; sleep 600 & wait"') || fail "sbatch"
  wait_until 30 "both tasks started" test -e "$T_WORK/cancel/started.0" -a -e "$T_WORK/cancel/started.1" ||
    { show_job "$job"; fail "step never started"; }
  [[ -n "$(procs_in "$T_WORK/cancel")" ]] || fail "no task process found in the job's working dir"
  scancel "$job.0" || fail "scancel $job.0"
  wait_until 30 "job $job to end" job_done "$job" || { show_job "$job"; fail "job did not end after step cancel"; }
  wait_eval 20 "no process left in the job dir" '[[ -z "$(procs_in "$T_WORK/cancel")" ]]' ||
    { ps -o pid,args -p "$(procs_in "$T_WORK/cancel" | tr '\n' ,)0"; fail "processes left after scancel"; }
}

check_requeue() {
  note "requeue from inside the job"
  cat >requeue.sbatch <<'EOS'
#!/bin/bash
#SBATCH --requeue --open-mode=append
echo "run restart_count=${SLURM_RESTART_COUNT:-unset}"
if [[ "${SLURM_RESTART_COUNT:-0}" == 0 ]]; then
  scontrol requeue "$SLURM_JOB_ID"; echo "requeue rc=$?"; sleep 30; exit 1
fi
echo "${SLURM_RESTART_COUNT}" > requeue.marker
EOS
  local job t0
  t0=$(date +%s)
  job=$(sbatch --parsable -N1 -o requeue.out requeue.sbatch) || fail "sbatch"
  wait_until 90 "requeued job to complete" job_state_is "$job" COMPLETED ||
    { show_job "$job"; cat requeue.out; fail "requeued job did not complete"; }
  [[ "$(cat requeue.marker 2>/dev/null)" == 1 ]] || { cat requeue.out; fail "marker missing or restart count != 1"; }
  [[ "$(job_field "$job" Restarts)" == 1 ]] || fail "Restarts=$(job_field "$job" Restarts), want 1"
  grep -q "run restart_count=unset\|run restart_count=0" requeue.out || fail "first generation missing from the log"
  note "requeue round trip $(( $(date +%s) - t0 ))s"
}

check_usr1_to_batch() {
  note "USR1 to the batch shell (scancel --signal=USR1 --batch)"
  cat >usr1.sbatch <<'EOS'
#!/bin/bash
trap 'echo got-USR1 > usr1.marker; exit 0' USR1
echo ready > usr1.ready
for i in $(seq 1 600); do sleep 0.1; done
exit 1
EOS
  local job
  job=$(sbatch --parsable -N1 -o usr1.out usr1.sbatch) || fail "sbatch"
  wait_until 30 "batch script ready" test -e usr1.ready || { show_job "$job"; fail "batch script never started"; }
  scancel --signal=USR1 --batch "$job" || fail "scancel --signal=USR1 --batch"
  wait_until 30 "job $job to complete" job_state_is "$job" COMPLETED || { show_job "$job"; fail "job did not complete"; }
  [[ "$(cat usr1.marker 2>/dev/null)" == got-USR1 ]] || fail "trap did not run"
}

check_port_taken() {
  note "a second cluster whose slurmctld port is already taken starts on other ports"
  local d out rc held
  d=$(mktemp -d /tmp/slp.XXXXXX) || fail "mktemp"
  # A real listener holds the port the first try is told to use for slurmctld.
  python3 -c '
import socket, sys, time
held = socket.socket(); held.bind(("0.0.0.0", 0)); held.listen()
free = []
for _ in range(2):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); free.append(s.getsockname()[1]); s.close()
print(held.getsockname()[1], *free, flush=True)
time.sleep(120)' >"$d.ports" &
  local holder=$!
  wait_until 10 "the listener" test -s "$d.ports" || fail "the port holder never started"
  read -r held _ <"$d.ports"
  out=$(SLURM_HARNESS_PORTS="$(cat "$d.ports")" "$T_HARNESS" run "$d" -- sinfo -h -N -o '%N %t' 2>&1); rc=$?
  kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
  ((rc == 0)) || fail "the cluster did not start (exit $rc):"$'\n'"$out"
  [[ "$out" == *"port was taken before it could bind it (attempt 1); retrying on other ports"* ]] ||
    fail "no retry reported:"$'\n'"$out"
  grep -qs "slurmctld=$held " "$d/ports" && fail "the retry kept the taken port $held: $(cat "$d/ports")"
  [[ "$out" == *"n1 idle"* && "$out" == *"n2 idle"* ]] || fail "nodes not idle after the retry:"$'\n'"$out"
  rm -rf "$d" "$d.ports"
}

body() {
  check_port_taken
  check_layout
  check_sbatch_wait
  check_scancel_step
  check_requeue
  check_usr1_to_batch
}

slurm_test_main "$@"
