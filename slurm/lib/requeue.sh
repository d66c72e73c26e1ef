# shellcheck shell=bash
# slurm/lib/requeue.sh — signal forwarding and requeue logic shared by the sbatch templates.
# Sourced (not run) by slurm/*.sbatch inside the batch shell. Bash only.
#
# The contract with ddp-trainer:
#   * SIGUSR1 or SIGTERM to a trainer task => it checkpoints and exits with DDP_EXIT_RESUMABLE
#     ("stopped, resumable"). DDP_EXIT_OK = finished, anything else = failed. The codes come
#     from `ddpctl exit-codes` (lib/ddp.sh), never from numbers written here.
#   * A requeued job restarts with the same job id and SLURM_RESTART_COUNT=1,2,...; the
#     templates then pass --resume auto so the trainer continues from its newest checkpoint.
#
# Why the batch shell, not Slurm, forwards the warning signal: the templates use
# `#SBATCH --signal=B:USR1@120`, which signals ONLY the batch shell (without "B:" Slurm
# signals the job steps and the batch shell never learns a stop was asked for). Bash runs a
# trap only when the foreground command returns, so the step runs in the background and the
# shell waits in `wait`, which a trapped signal interrupts at once. The trap forwards USR1 to
# the local `srun`, and srun forwards it to every task of the step; Slurm delivers it to each
# task's whole process tree, so workers forked by a trainer task receive it too.
# `scancel --signal=USR1 --batch <jobid>` reaches the same trap by hand (checkpoint + requeue).
#
# Requeue policy (DDP_REQUEUE): "auto" (default) — when the step exits DDP_EXIT_RESUMABLE after
# the batch shell received USR1 (the time-limit warning, preemption notice, or
# `scancel --signal=USR1 --batch`) and was not itself told to terminate (SIGTERM: scancel, time
# limit, preemption — Slurm then decides the job's fate), run `scontrol requeue $SLURM_JOB_ID`, up to DDP_MAX_RESTARTS
# generations (default 100). An operator's `ddpctl stop` also ends the step resumable (a
# checkpoint to resume from) but sends no USR1: the job then ends, resumable by hand.
# "always" — requeue after any resumable exit. "never" — never requeue; the job ends resumable.
#
# Tested by tests/integration/slurm/ on a real 2-node cluster with a stub trainer.

# shellcheck source=ddp.sh
source "$(dirname "${BASH_SOURCE[0]}")/ddp.sh"
# DDP_EXIT_RESUMABLE and the other codes, from `ddpctl exit-codes`.
ddp_load_exit_codes || { ddp_log "error: cannot read the exit codes from ddpctl"; return 1; }

# ddp_run_step CMD...: run CMD (an srun line) in the background, forward USR1 to it, wait for
# it, and return its exit code. Sets DDP_GOT_USR1 / DDP_GOT_TERM (0/1).
ddp_run_step() {
  if ((DDP_GOT_USR1)); then
    ddp_log "stop requested before the step started: not starting it"
    return "$DDP_EXIT_RESUMABLE"
  fi
  "$@" &
  DDP_STEP_PID=$!
  local rc
  while :; do
    wait "$DDP_STEP_PID"
    rc=$?
    # wait returns >128 when a trapped signal interrupts it while the step still runs.
    if ((rc > 128)) && kill -0 "$DDP_STEP_PID" 2>/dev/null; then continue; fi
    break
  done
  ddp_log "step exited with code $rc (USR1 received: $DDP_GOT_USR1, TERM received: $DDP_GOT_TERM)"
  if ((rc == 128 + $(kill -l USR1) && DDP_GOT_USR1)); then
    # Tasks killed by the forwarded USR1 itself: the trainer had no handler yet (it was still
    # starting). Nothing newer than the last checkpoint is lost by coming back; treat as stopped.
    ddp_log "the step died of SIGUSR1 (trainer not ready for it yet); treating it as stopped"
    rc=$DDP_EXIT_RESUMABLE
  fi
  return "$rc"
}

_ddp_on_usr1() {
  DDP_GOT_USR1=1
  if [[ -z "${DDP_STEP_PID:-}" ]]; then
    ddp_log "SIGUSR1 (time limit near or stop requested) before the step started"
    return
  fi
  ddp_log "SIGUSR1 (time limit near or stop requested): forwarding to the step (srun pid $DDP_STEP_PID)"
  kill -USR1 "$DDP_STEP_PID" 2>/dev/null || ddp_log "warning: could not signal srun $DDP_STEP_PID"
}

_ddp_on_term() {
  # scancel / time limit / preemption: Slurm signals the tasks itself; we only stay alive long
  # enough to report the step's exit code, and do not requeue (Slurm owns the job's fate now).
  DDP_GOT_TERM=1
  ddp_log "SIGTERM: the job is being ended by Slurm; waiting for the step"
}

# ddp_finish RC: apply the requeue policy to the step's exit code and exit the batch script.
ddp_finish() {
  local rc=$1 policy=${DDP_REQUEUE:-auto} gen=${SLURM_RESTART_COUNT:-0}
  local stopped="stopped (exit $DDP_EXIT_RESUMABLE)"
  if ((rc == DDP_EXIT_OK)); then ddp_log "training finished"; exit "$DDP_EXIT_OK"; fi
  if ((rc != DDP_EXIT_RESUMABLE)); then ddp_log "training failed (exit $rc); not requeueing"; exit "$rc"; fi
  if [[ "$policy" == never ]]; then ddp_log "$stopped; DDP_REQUEUE=never"; exit "$rc"; fi
  if ((DDP_GOT_TERM)); then ddp_log "$stopped while Slurm ends the job; not requeueing"; exit "$rc"; fi
  if [[ "$policy" != always ]] && ((!DDP_GOT_USR1)); then
    ddp_log "$stopped without a USR1 (e.g. ddpctl stop): not requeueing; resubmit to resume"; exit "$rc"
  fi
  if ((gen >= ${DDP_MAX_RESTARTS:-100})); then
    ddp_log "$stopped but generation $gen reached DDP_MAX_RESTARTS=${DDP_MAX_RESTARTS:-100}"; exit "$rc"
  fi
  ddp_log "stopped for requeue (exit $DDP_EXIT_RESUMABLE): scontrol requeue $SLURM_JOB_ID"
  # Read before the requeue: it signals every process of the job, a ddpctl running then too.
  local exclude excluded=""
  exclude=$(ddp_exclude_list)
  if [[ -n "$exclude" ]]; then
    excluded=$(scontrol show job "$SLURM_JOB_ID" -o 2>/dev/null | tr ' ' '\n' | sed -n 's/^ExcNodeList=//p')
    [[ "$excluded" != "(null)" ]] || excluded=""
  fi
  if scontrol requeue "$SLURM_JOB_ID"; then
    ddp_exclude_nodes "$exclude" "$excluded"
    exit "$DDP_EXIT_OK"   # Slurm ends this generation now and starts the next one with SLURM_RESTART_COUNT+1
  fi
  ddp_log "error: scontrol requeue failed (was the job submitted with --requeue?)"
  exit "$rc"
}

# ddp_exclude_list: prints the nodes of the job's exclude list (<DIST_FILE>.exclude, written by
# the coordinator under --straggler-action exclude), comma-separated as `ddpctl stragglers
# --exclude-list` prints them; nothing when there is none.
ddp_exclude_list() {
  local ctl
  [[ -n "${DIST_FILE:-}" && -s "$DIST_FILE.exclude" ]] || return 0
  ctl=$(ddp_find_bin ddpctl) || return 0
  "$ctl" --dist-file "$DIST_FILE" stragglers --exclude-list ||
    ddp_log "warning: cannot read the exclude list $DIST_FILE.exclude; the next allocation may use any node"
}

# ddp_exclude_nodes NODES EXCLUDED: after `scontrol requeue`, leaves NODES (a comma-separated
# list; empty: nothing to do) out of the next generation's allocation, on top of EXCLUDED (the
# job's ExcNodeList, read before the requeue). Slurm changes a job's ExcNodeList only while the
# job is pending, which a requeued job is within a moment; the batch shell outlives the
# requeue's SIGTERM (it traps it), but the commands it runs then may not: the SIGTERM reaches the
# job's every process, and a `seq` or `sleep` it kills must not end the retries. So the loop
# runs on bash's own clock, and nothing is read after the requeue.
ddp_exclude_nodes() {
  local nodes=$1 old=${2:-} deadline=$((SECONDS + 10))
  [[ -n "$nodes" ]] || return 0
  while ((SECONDS < deadline)); do
    if scontrol update JobId="$SLURM_JOB_ID" ExcNodeList="${old:+$old,}$nodes" 2>/dev/null; then
      ddp_log "the requeued job excludes node(s) $nodes (stragglers: --straggler-action exclude)"
      return 0
    fi
    sleep 0.25 || true
  done
  ddp_log "warning: could not exclude node(s) $nodes from the requeued job (scontrol update ExcNodeList)"
}

# Traps from the moment this file is sourced: a USR1 that arrives before the step starts must
# not kill the batch shell (bash's default for USR1), it just means "do not start, requeue".
DDP_GOT_USR1=${DDP_GOT_USR1:-0} DDP_GOT_TERM=0 DDP_STEP_PID=""
trap '_ddp_on_usr1' USR1
trap '_ddp_on_term' TERM

# DDP_RESUME_ARGS: (--resume auto) on a restarted generation (SLURM_RESTART_COUNT > 0), else ().
# shellcheck disable=SC2034  # used by the templates
DDP_RESUME_ARGS=()
# shellcheck disable=SC2034
if ((${SLURM_RESTART_COUNT:-0} > 0)); then DDP_RESUME_ARGS=(--resume auto); fi
