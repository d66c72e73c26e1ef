#!/usr/bin/env bash
# stub-trainer.sh — stands in for ddp-trainer in the Slurm kit tests (DDP_TRAINER=this file).
# Follows the trainer's stop contract: SIGUSR1/SIGTERM => "checkpoint" and exit resumable
# (DDP_EXIT_RESUMABLE, read through `ddpctl exit-codes` like every script). It forks
# --nprocs-per-node "workers" like the real trainer, and records what it saw in $STUB_OUT:
#   gen<G>.task<P>        args + Slurm layout of task P in generation G (SLURM_RESTART_COUNT)
#   gen<G>.task<P>.ready  written once the signal traps are installed
#   gen<G>.task<P>.result "finished" | "stopped by USR1" | "stopped by TERM" | "worker ..."
# Generations < STUB_STOP_GENERATIONS (default 1) wait for a signal (at most STUB_WAIT s);
# later generations finish at once (exit 0), or exit STUB_FINAL_EXIT if set. STUB_NO_TRAP=1:
# generation 0 installs no handler (dies of the signal).
set -u
# shellcheck source=../../../slurm/lib/ddp.sh
source "$(dirname "$0")/../../../slurm/lib/ddp.sh"
ddp_load_exit_codes || exit 1
gen=${SLURM_RESTART_COUNT:-0}
out=${STUB_OUT:?STUB_OUT not set}/gen$gen.task${SLURM_PROCID:-0}
nprocs=1 prev=""
for a in "$@"; do [[ "$prev" == --nprocs-per-node ]] && nprocs=$a; prev=$a; done
{
  echo "args: $*"
  echo "layout: node=${SLURMD_NODENAME:-} nodeid=${SLURM_NODEID:-} procid=${SLURM_PROCID:-} localid=${SLURM_LOCALID:-} ntasks=${SLURM_NTASKS:-} gpus_on_node=${SLURM_GPUS_ON_NODE:-} cvd=${CUDA_VISIBLE_DEVICES:-} cwd=$PWD"
} >"$out"

if ((gen >= ${STUB_STOP_GENERATIONS:-1})); then
  echo finished >"$out.result"
  exit "${STUB_FINAL_EXIT:-$DDP_EXIT_OK}"
fi

if [[ -n "${STUB_NO_TRAP:-}" ]]; then   # a trainer that dies of USR1 (no handler yet)
  echo ready >"$out.ready"
  echo "died of the signal" >"$out.result"   # the test checks the job's outcome instead
  sleep "${STUB_WAIT:-120}"
  exit 1
fi
stop=""
trap 'stop=USR1' USR1
trap 'stop=TERM' TERM
workers=()
for ((w = 0; w < nprocs; w++)); do
  ( stopw=""; trap 'stopw=1' USR1 TERM
    while [[ -z "$stopw" ]]; do sleep 0.2; done
    exit "$DDP_EXIT_RESUMABLE" ) &
  workers+=($!)
done
echo ready >"$out.ready"
deadline=$((SECONDS + ${STUB_WAIT:-120}))
while [[ -z "$stop" ]] && ((SECONDS < deadline)); do sleep 0.2; done
if [[ -z "$stop" ]]; then
  echo "timeout" >"$out.result"; kill "${workers[@]}" 2>/dev/null; exit 1
fi
# Slurm signals the whole task (workers included); forward anyway, as the real trainer would.
kill -USR1 "${workers[@]}" 2>/dev/null
wrc=0
for w in "${workers[@]}"; do wait "$w"; r=$?; ((r == DDP_EXIT_RESUMABLE)) || wrc=$r; done
echo "stopped by $stop (workers: ${#workers[@]}, worker rc ${wrc})" >"$out.result"
exit "$DDP_EXIT_RESUMABLE"
