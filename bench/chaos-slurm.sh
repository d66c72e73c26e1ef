#!/usr/bin/env bash
# Chaos on the real Slurm test cluster: one job of slurm/multi-node.sbatch on 3 nodes (nodes 0
# and 1 train one CPU worker each, world 2, the demo's CNN with its BatchNorm buffers; node 2 is
# a spare, SPARE_NODES=1) under a seeded stream of real faults for MINUTES (default 15), then the
# job must end COMPLETED with a final.pt bit for bit equal to an uninterrupted srun of the same
# flags (run in the background meanwhile). Every fault is real: a SIGKILL of a worker, of the
# coordinator, of a node's whole task tree (node 1's, or the coordinator's node), a SIGSTOP of a
# worker past the heartbeat timeout, `scontrol requeue` of the job, and the kit's own requeue
# (`scancel --signal=USR1 --batch`: checkpoint, exit 3, requeue). A node is killed only while the
# spare stands by (the status says so); a requeue brings the spare back.
#
#   DDP_BIN_DIR=build/bin bench/chaos-slurm.sh [--minutes M] [--seed S] [--every A-B]
#   env: CHAOS_SAMPLES (synthetic samples; sized so that the job outlasts the chaos),
#        SLURM_TEST_KEEP=1 keeps the cluster folder (logs) for a look
# Prints one line per fault and ends with a summary line:
#   slurm chaos: faults N (kind xK, ...), requeues R, job COMPLETED, final.pt bit for bit equal to the reference
# Exit 0 when the job completed and final.pt is bit for bit the reference's; 1 otherwise; 2 on
# bad usage. Needs what the Slurm tests need (make test installs it; scripts/slurm-cluster.sh).
# Method and a run: docs/bench-chaos.md, "On the real Slurm cluster".
set -uo pipefail
if [[ ${1:-} != --inside-cluster ]]; then
  export CHAOS_MINUTES=${CHAOS_MINUTES:-15} CHAOS_SEED=${CHAOS_SEED:-$RANDOM} CHAOS_EVERY=${CHAOS_EVERY:-20-40}
  while (($#)); do
    case $1 in
      --minutes) CHAOS_MINUTES=$2; shift 2 ;;
      --seed) CHAOS_SEED=$2; shift 2 ;;
      --every) CHAOS_EVERY=$2; shift 2 ;;
      -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
      *) echo "bench/chaos-slurm.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
  done
  [[ $CHAOS_MINUTES =~ ^[0-9]+$ && $CHAOS_MINUTES -ge 1 ]] ||
    { echo "bench/chaos-slurm.sh: --minutes wants a whole number >= 1" >&2; exit 2; }
  [[ $CHAOS_SEED =~ ^[0-9]+$ ]] || { echo "bench/chaos-slurm.sh: --seed wants a number" >&2; exit 2; }
  [[ $CHAOS_EVERY =~ ^([0-9]+)-([0-9]+)$ ]] && ((BASH_REMATCH[1] >= 5 && BASH_REMATCH[1] <= BASH_REMATCH[2])) ||
    { echo "bench/chaos-slurm.sh: --every wants A-B seconds, 5 <= A <= B (e.g. 20-40)" >&2; exit 2; }
fi
export SLURM_HARNESS_NODES=3
# The Slurm tests' helpers: the cluster (lib.sh), the kit's submit (trainer_lib.sh).
SL=$(cd "$(dirname "$0")/../tests/integration/slurm" && pwd)
source "$SL/lib.sh"
source "$SL/kit_lib.sh"
source "$SL/trainer_lib.sh"
tr_require

# The test cluster's three nodes share this machine's cores: one intra-op thread per worker, or
# the job's and the reference's workers, each taking every core, oversubscribe them (a step
# measured ~0.3 s instead of tens of ms). A real node's worker has its node's cores to itself.
export OMP_NUM_THREADS=1
# World 2, batch 16: CHAOS_SAMPLES / 32 steps per epoch, 2 epochs. About 25 ms a step on 2 idle
# cores while the reference trains beside it: the default outlasts 15 minutes of faults.
CHAOS_SAMPLES=${CHAOS_SAMPLES:-$((CHAOS_MINUTES * 60 * 40 * 32 / 2))}
DATA="synthetic:${CHAOS_SAMPLES}x1x16x16:10"
EPOCHS=2
SEED=$((CHAOS_SEED % 100000))
HB=5  # --heartbeat-timeout

# node_tasks JOB -> "NODEID PID" of each live ddp-trainer task of JOB (not its workers)
node_tasks() {
  local p
  for p in $(pgrep -x ddp-trainer); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- --internal-worker && continue
    [[ "$(env_of "$p" SLURM_JOB_ID)" == "$1" ]] || continue
    echo "$(env_of "$p" SLURM_NODEID) $p"
  done
}
# coordinator_task JOB -> the pid of the task whose child is the serving coordinator (the newest
# epoch when, for a moment, a fenced one still runs)
coordinator_task() {
  local pid c best="" best_epoch=-1 e
  while read -r _ pid; do
    for c in $(pgrep -P "$pid" -x ddp-coordinator); do
      e=$(tr '\0' '\n' <"/proc/$c/cmdline" 2>/dev/null | sed -n '/^--epoch$/{n;p}' | head -1)
      e=${e:-0}
      ((e > best_epoch)) && { best_epoch=$e; best=$pid; }
    done
  done < <(node_tasks "$1")
  echo "$best"
}
# kill_tree PID: SIGKILL a task, every process below it and its process group
kill_tree() {
  local pgid victims p
  pgid=$(ps -o pgid= -p "$1" | tr -d ' ')
  mapfile -t victims < <({ descendants "$1"; [[ -n $pgid ]] && ps -o pid= -g "$pgid"; } | tr -d ' ' | sort -un)
  [[ -n $pgid ]] && kill -KILL -- "-$pgid" 2>/dev/null
  kill -KILL "${victims[@]}" 2>/dev/null
  echo "${#victims[@]}"
}
status_json() { tr_status "$DF"; }
json() { python3 -c 'import json,sys; d=json.loads(sys.argv[1])
for k in sys.argv[2].split("."):
    d = d.get(k) if isinstance(d, dict) else None
print("" if d is None else d)' "$1" "$2" 2>/dev/null; }
rank_pid() { python3 -c 'import json,sys; print(next((r["pid"] for r in json.loads(sys.argv[1])["ranks"] if r["rank"]==int(sys.argv[2])), ""))' "$1" "$2" 2>/dev/null; }

# The seeded schedule: gaps U(A, B) s, kinds dealt from a deck reshuffled each round.
KINDS=(worker coord node node0 stop_long requeue preempt)
declare -A COUNT SKIPPED
scale() { awk -v r="$1" -v n="$2" 'BEGIN { print int(r * n) }'; }  # scale R N -> floor(R*N)
rng() { python3 -c "import random,sys; r=random.Random(int(sys.argv[1])); print(' '.join(str(r.random()) for _ in range(int(sys.argv[2]))))" "$1" "$2"; }

inject() {  # inject KIND R -> logs the fault; returns 1 when skipped
  local kind=$1 r=$2 j state spares pid task n t0 rank
  j=$(status_json) || j=""
  state=$(json "$j" state)
  case $kind in
    requeue)
      scontrol requeue "$JOB" >/dev/null 2>&1 || { note "fault $kind skipped: scontrol requeue refused (state $(job_field "$JOB" JobState))"; return 1; }
      note "fault $kind: scontrol requeue $JOB (at step $(json "$j" step))"; return 0 ;;
    preempt)
      [[ $state == RUNNING ]] || { note "fault $kind skipped: job $state"; return 1; }
      scancel --signal=USR1 --batch "$JOB" || return 1
      note "fault $kind: scancel --signal=USR1 --batch $JOB (at step $(json "$j" step))"; return 0 ;;
  esac
  [[ $state == RUNNING ]] || { note "fault $kind skipped: job ${state:-not answering}"; return 1; }
  case $kind in
    worker)
      rank=$(scale "$r" 2)
      pid=$(rank_pid "$j" "$rank")
      [[ -n $pid ]] || return 1
      kill -KILL "$pid" && note "fault $kind: SIGKILL rank $rank (pid $pid) at step $(json "$j" step)" ;;
    coord)
      task=$(coordinator_task "$JOB")
      pid=$(pgrep -P "${task:-0}" -x ddp-coordinator | head -1)
      [[ -n $pid ]] || { note "fault $kind skipped: no coordinator process found"; return 1; }
      kill -KILL "$pid" && note "fault $kind: SIGKILL coordinator pid $pid (epoch $(json "$j" coordinator.epoch)) at step $(json "$j" step)" ;;
    node|node0)
      spares=$(json "$j" spare_nodes)
      [[ ${spares:-0} -ge 1 ]] || { note "fault $kind skipped: no spare standing by"; return 1; }
      local coord_task victim=""
      coord_task=$(coordinator_task "$JOB")
      if [[ $kind == node0 ]]; then
        victim=$coord_task
      else
        # a training node's task that does not run the coordinator: the parent of a rank's worker
        for rank in 0 1; do
          pid=$(rank_pid "$j" "$rank")
          t=$(ps -o ppid= -p "${pid:-0}" 2>/dev/null | tr -d ' ')
          [[ -n $t && $t != "$coord_task" ]] && { victim=$t; break; }
        done
      fi
      [[ -n $victim ]] || { note "fault $kind skipped: no such task found"; return 1; }
      local slurm_node; slurm_node=$(env_of "$victim" SLURM_NODEID); slurm_node=${slurm_node:-?}
      n=$(kill_tree "$victim")
      note "fault $kind: SIGKILL Slurm node $slurm_node's task tree (task pid $victim, $n processes$([[ $victim == "$coord_task" ]] && echo ", the coordinator's")) at step $(json "$j" step)" ;;
    stop_long)
      rank=$(scale "$r" 2)
      pid=$(rank_pid "$j" "$rank")
      [[ -n $pid ]] || return 1
      kill -STOP "$pid"; t0=$SECONDS
      note "fault $kind: SIGSTOP rank $rank (pid $pid) for $((HB + 3)) s"
      sleep $((HB + 3))
      kill -CONT "$pid" 2>/dev/null
      [[ -d /proc/$pid ]] && [[ "$(ps -o stat= -p "$pid")" != Z* ]] &&
        note "  rank $rank (pid $pid) still runs after $((SECONDS - t0)) s stopped (not fenced yet)" ;;
  esac
  return 0
}

body() {
  local w=$T_WORK/chaos ref=$T_WORK/ref rc
  mkdir -p "$w" "$ref"
  local flags=(--backend gloo --data "$DATA" --arch cnn --epochs "$EPOCHS" --batch-size 16 --lr 0.1
               --seed "$SEED" --print-freq 500 --workers 0 --heartbeat-timeout "$HB" --linger 0)
  note "seed $CHAOS_SEED, a fault every $CHAOS_EVERY s for $CHAOS_MINUTES min; data $DATA, $EPOCHS epochs, world 2 + 1 spare node"
  note "uninterrupted reference run (srun, 2 nodes x 1 worker), in the background"
  srun --job-name=ref --chdir="$ref" -N2 --ntasks-per-node=1 --gres=gpu:1 "$TR_TRAINER" \
    --nprocs-per-node 1 "${flags[@]}" --checkpoint-dir "$ref/ckpt" >"$ref/out" 2>&1 &
  local ref_pid=$!
  JOB=$(TR_ARCH=cnn SPARE_NODES=1 DATA=$DATA EPOCHS=$EPOCHS LR=0.1 SEED=$SEED PRINT_FREQ=500 DDP_MAX_RESTARTS=1000 \
        EXTRA_ARGS="--workers 0 --heartbeat-timeout $HB --failover-timeout 2 --coordinator-grace 30 --max-restarts 100000 --coordinator-restarts 1000 --checkpoint-every 500" \
        tr_submit chaos --nodes=3 --gres=gpu:1 --cpus-per-task=1 --time=120) || fail sbatch
  DF=$w/dist_file.$JOB
  note "job $JOB submitted (3 nodes, SPARE_NODES=1)"
  wait_until 180 "job $JOB training" tr_step_at_least "$DF" 50 ||
    { show_job "$JOB"; dump_file "$w/job.out"; fail "never trained"; }

  local a=${CHAOS_EVERY%-*} b=${CHAOS_EVERY#*-} end=$((SECONDS + CHAOS_MINUTES * 60)) i=0 deck=() faults=0
  local -a rs
  read -r -a rs <<<"$(rng "$CHAOS_SEED" 4000)"
  local next=$((SECONDS + a)) k s tmp r
  while ((SECONDS < end)); do
    job_done "$JOB" && { note "the job ended before the chaos window did (after $((CHAOS_MINUTES * 60 - end + SECONDS)) s): give it more data (CHAOS_SAMPLES)"; break; }
    if ((SECONDS < next)); then sleep 0.5; continue; fi
    if ((${#deck[@]} == 0)); then  # a new round: every kind once, shuffled
      deck=("${KINDS[@]}")
      for ((k = ${#deck[@]} - 1; k > 0; k--)); do
        s=$(scale "${rs[i]}" $((k + 1)))
        i=$((i + 1))
        tmp=${deck[k]}; deck[k]=${deck[s]}; deck[s]=$tmp
      done
    fi
    local kind=${deck[-1]}
    unset 'deck[-1]'
    r=${rs[i]}
    i=$((i + 1))
    if inject "$kind" "$r"; then
      COUNT[$kind]=$((${COUNT[$kind]:-0} + 1)); faults=$((faults + 1))
    else
      SKIPPED[$kind]=$((${SKIPPED[$kind]:-0} + 1))
    fi
    next=$((SECONDS + a + $(scale "${rs[i]}" $((b - a + 1)))))
    i=$((i + 1))
    # Faults come only while the job trains (a requeued job is first pending, then starting).
    wait_eval 600 "job $JOB training again" "job_done $JOB || tr_step_at_least $DF 1" >/dev/null
  done
  note "chaos window over: $faults faults; waiting for job $JOB to end"
  wait_until 3600 "job $JOB to end" job_done "$JOB" || { show_job "$JOB"; fail "job did not end"; }
  local outcome restarts
  outcome="$(job_field "$JOB" JobState)/$(job_field "$JOB" ExitCode)"
  restarts=$(job_field "$JOB" Restarts)
  note "job $JOB: $outcome after $restarts requeue(s)"
  grep -hE 'took over|lost with its coordinator|recovery [0-9]+:|resuming from|requeue' "$w/job.out" "$DF".coordinator.log* 2>/dev/null |
    sed 's/^/    | /' | tail -40
  local summary="" kind_list="" skipped=0
  for k in "${KINDS[@]}"; do
    kind_list+="${kind_list:+, }$k x${COUNT[$k]:-0}"
    skipped=$((skipped + ${SKIPPED[$k]:-0}))
  done
  summary="slurm chaos: faults $faults ($kind_list; $skipped skipped), requeues $restarts, job ${outcome%%/*}"
  if [[ $outcome != "COMPLETED/$DDP_EXIT_OK:0" ]]; then
    # Judged before the reference ends: a failed job needs no comparison, so it is not awaited.
    kill -TERM "$ref_pid" 2>/dev/null
    echo "$summary"; dump_file "$w/job.out"; fail "want COMPLETED/$DDP_EXIT_OK:0, got $outcome"
  fi
  wait "$ref_pid"; rc=$?
  ((rc == DDP_EXIT_OK)) || { dump_file "$ref/out"; fail "reference run exit $rc"; }
  [[ -s "$ref/ckpt/final.pt" && -s "$w/checkpoints/$JOB/final.pt" ]] || fail "final.pt missing"
  if tr_same_weights "$w/checkpoints/$JOB/final.pt" "$ref/ckpt/final.pt"; then
    echo "$summary, final.pt bit for bit equal to the reference"
  else
    echo "$summary, final.pt DIFFERS from the reference"; fail "final weights differ"
  fi
}

slurm_test_main "$@"
