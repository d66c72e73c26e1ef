# shellcheck shell=bash
# slurm/lib/job.sh — the body every sbatch template shares (sourced by slurm/*.sbatch after their
# #SBATCH lines; bash only). A template differs from the others only in its resources and in
# the one word it passes to ddp_job:
#
#   ddp_job per-node      one task per node; each ddp-trainer spawns a worker per GPU of its node
#   ddp_job single-node   one task on one node, spawning a worker per GPU
#   ddp_job per-gpu       one task per GPU; every task is one worker (--nprocs-per-node 1)
#
# Training settings: set them in the template (before `ddp_job`) or in the environment of
# sbatch (`DATA=... ARCH=... sbatch ...`); these are the defaults.
#   DATA=synthetic        fashion-mnist[:DIR] mnist:DIR cifar10:DIR imagefolder:DIR synthetic
#   ARCH=resnet18         mlp cnn resnet18 resnet34 resnet50
#   EPOCHS=90  BATCH_SIZE=64 (per worker)  LR=0.1  SEED=0  PRINT_FREQ=10
#   BACKEND=auto          auto | nccl | gloo
#   EXTRA_ARGS=""         any other ddp-trainer flags, e.g. "--weight-decay 1e-4"
#   DIST_FILE=$PWD/dist_file.$SLURM_JOB_ID   the rendezvous file ddpctl and ddp-status.sh read
#   CHECKPOINT_DIR=$PWD/checkpoints/$SLURM_JOB_ID
#   GPUS_PER_NODE=$SLURM_GPUS_ON_NODE (per-node, single-node layouts)
#   SPARE_NODES=0         per-node layout: the last K nodes are spares that take over a node
#                         lost as a whole (ddp-trainer --spare-nodes; the step runs with
#                         --no-kill so that a failed node does not end it)
#   MIN_NODES=0           per-node layout: without a spare, a lost node is dropped and the job
#                         goes on while this many nodes remain (ddp-trainer --min-nodes; --no-kill)
#   STANDBY=auto          auto: a step of 2 or more nodes runs with a standby coordinator: node
#                         1's task takes the job over when node 0 (its task, the coordinator and
#                         its workers) is lost (ddp-trainer --standby auto, its default); in the
#                         per-node layout such a step runs with --no-kill, so that node 0's loss
#                         does not end it. off: node 0's loss ends the job (--standby off)
#   DDP_TRAINER           the trainer to run (default: ddp_find_bin ddp-trainer, lib/ddp.sh)
# Stopping and requeueing: lib/requeue.sh.

# shellcheck source=requeue.sh
source "$(dirname "${BASH_SOURCE[0]}")/requeue.sh" || return 1

DATA=${DATA:-synthetic}
ARCH=${ARCH:-resnet18}
EPOCHS=${EPOCHS:-90}
BATCH_SIZE=${BATCH_SIZE:-64}
LR=${LR:-0.1}
SEED=${SEED:-0}
PRINT_FREQ=${PRINT_FREQ:-10}
BACKEND=${BACKEND:-auto}
EXTRA_ARGS=${EXTRA_ARGS:-}
DIST_FILE=${DIST_FILE:-$PWD/dist_file.$SLURM_JOB_ID}
CHECKPOINT_DIR=${CHECKPOINT_DIR:-$PWD/checkpoints/$SLURM_JOB_ID}
GPUS_PER_NODE=${GPUS_PER_NODE:-${SLURM_GPUS_ON_NODE:-1}}
SPARE_NODES=${SPARE_NODES:-0}
MIN_NODES=${MIN_NODES:-0}
STANDBY=${STANDBY:-auto}

# ddp_record_dist_file: records where the job's dist_file is in its Slurm Comment, as
# "ddp:dist_file=<absolute path>" after whatever the user's comment says (an earlier generation's
# record is replaced), so that `ddpctl ls` finds the job. A failure only warns: the job runs the
# same without it (ddpctl ls then looks for <WorkDir>/dist_file.<job id>).
ddp_record_dist_file() {
  local path=$DIST_FILE comment record
  [[ $path == /* ]] || path=$PWD/$path
  record="ddp:dist_file=$path"
  comment=$(squeue --noheader --jobs="$SLURM_JOB_ID" --format=%k 2>/dev/null) || comment=""
  [[ $comment == "(null)" ]] && comment=""
  [[ $comment == *"$record" ]] && return 0
  comment=${comment%%ddp:dist_file=*}
  comment=${comment%"${comment##*[! ]}"}  # trailing spaces
  if ! scontrol update JobId="$SLURM_JOB_ID" Comment="${comment:+$comment }$record" >/dev/null 2>&1; then
    ddp_log "warning: could not record the dist_file in the job's comment (ddpctl ls finds the job by its WorkDir only)"
  fi
}

# ddp_job LAYOUT: runs the training step in LAYOUT and exits the batch script with the outcome
# (lib/requeue.sh: ddp_run_step, ddp_finish).
ddp_job() {
  local layout=$1 trainer
  trainer=${DDP_TRAINER:-$(ddp_find_bin ddp-trainer)} || exit 1
  local -a srun_args extra extra_spares=() extra_standby=()
  local nprocs survives_lost_node=0
  case "$STANDBY" in
    auto) ;;
    off) extra_standby=(--standby off) ;;
    *) ddp_log "error: STANDBY='$STANDBY' (auto or off)"; exit 1 ;;
  esac
  case "$layout" in
    per-node)
      srun_args=(--ntasks-per-node=1) nprocs=$GPUS_PER_NODE
      if [[ $SPARE_NODES != 0 || $MIN_NODES != 0 ]]; then
        survives_lost_node=1
        extra_spares=(--spare-nodes "$SPARE_NODES" --min-nodes "$MIN_NODES")
      fi
      # A step of 2 or more nodes has a standby coordinator (node 1's task) unless STANDBY=off:
      # node 0's task may die while the others finish the job.
      if ((${SLURM_JOB_NUM_NODES:-1} >= 2)) && [[ $STANDBY != off ]]; then
        survives_lost_node=1
      fi
      if ((survives_lost_node)); then srun_args+=(--no-kill); fi
      ddp_log "nodes=$SLURM_JOB_NUM_NODES (spares $SPARE_NODES) gpus/node=$GPUS_PER_NODE dist_file=$DIST_FILE checkpoints=$CHECKPOINT_DIR" ;;
    single-node)
      srun_args=(--nodes=1 --ntasks=1) nprocs=$GPUS_PER_NODE
      ddp_log "node=${SLURMD_NODENAME:-?} gpus=$GPUS_PER_NODE dist_file=$DIST_FILE checkpoints=$CHECKPOINT_DIR" ;;
    per-gpu)
      srun_args=() nprocs=1
      ddp_log "nodes=$SLURM_JOB_NUM_NODES tasks=$SLURM_NTASKS dist_file=$DIST_FILE checkpoints=$CHECKPOINT_DIR" ;;
    *) ddp_log "error: unknown layout '$layout' (per-node, single-node, per-gpu)"; exit 1 ;;
  esac
  read -r -a extra <<<"$EXTRA_ARGS"
  # Neither group nor others may write it, whatever the site's umask (the trainer refuses a
  # checkpoint folder they could plant files in).
  (umask 022 && mkdir -p "$CHECKPOINT_DIR")
  # The coordinator publishes the job's outcome beside the dist_file when the job ends; one left
  # by an earlier step at this path must not speak for this one.
  rm -f -- "$DIST_FILE.result"
  ddp_record_dist_file
  # --kill-on-bad-exit=0: the coordinator, not Slurm, decides when a failed rank ends the job
  # (and a task that exits resumable must not kill others still checkpointing).
  ddp_run_step srun "${srun_args[@]}" --kill-on-bad-exit=0 \
    "$trainer" --dist-file "$DIST_FILE" --nprocs-per-node "$nprocs" --backend "$BACKEND" \
    --data "$DATA" --arch "$ARCH" --epochs "$EPOCHS" --batch-size "$BATCH_SIZE" --lr "$LR" \
    --seed "$SEED" --print-freq "$PRINT_FREQ" --checkpoint-dir "$CHECKPOINT_DIR" \
    "${extra_spares[@]}" "${extra_standby[@]}" "${DDP_RESUME_ARGS[@]}" "${extra[@]}"
  local rc=$?
  # With spares, shrinking or a standby, a lost node's task ends badly (killed, or its node
  # failed) while the others finish the job, or stop it resumable (a preemption after the loss:
  # the step's code is then the dead task's, not the stop's): the coordinator's result file
  # (never its log, which carries strings from clients) says how the job ended.
  if ((rc != DDP_EXIT_OK)) && ((survives_lost_node)); then
    case $(ddp_job_outcome "$DIST_FILE") in
      SUCCEEDED)
        ddp_log "a task of the step exited $rc (a lost node), but the job SUCCEEDED on the others"
        rc=$DDP_EXIT_OK ;;
      STOPPED)
        if ((rc != DDP_EXIT_RESUMABLE)); then
          ddp_log "a task of the step exited $rc (a lost node), but the job STOPPED resumable on the others"
          rc=$DDP_EXIT_RESUMABLE
        fi ;;
    esac
  fi
  ddp_finish "$rc"
}
