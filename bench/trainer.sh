#!/usr/bin/env bash
# End-to-end training throughput: ddp-trainer vs the recipe in Python (DDP +
# DistributedSampler + DataLoader, bench/trainer/python_recipe.py), same model, data, world size,
# batch size, optimizer and threads, both measured in this run. Prints samples/s of each and
# ratio = ours / python (> 1: we are faster). Targets: >= 1.2 on the MLP, >= 1.0 on ResNet-18.
#
#   BUILD_DIR=build-fd bench/trainer.sh
#   env: REPEAT=3 (runs per side; the table shows medians)  CASES="mlp resnet18" (which, in order)
#        PAIRED=auto|1|0 (see below)  SLICE=1.0 (seconds per turn when paired)
#        QUICK=1 (fewer steps)  LOGS=DIR (keep the timestamped logs and the turn records)
#
# Conditions, both sides: CPU, Gloo, 2 ranks on this machine, 1 intra-op thread per rank
# (OMP_NUM_THREADS=1 for both; the recipe also calls torch.set_num_threads(1)), in-process data
# loading (ours --workers 0, DataLoader num_workers=0), SGD lr 0.05 momentum 0.9 wd 1e-4, no
# evaluation, loss.item() + top-1/5 only on print steps, DDP buckets 25 MB.
#   mlp       Fashion-MNIST train split (IDX files), batch 64 per rank; ours --arch mlp
#             (784-512-256-10), Python the same network as an eager nn.Module.
#   resnet18  random 3x32x32 images, 10 classes, batch 32 per rank; ours --arch resnet18 on
#             --data synthetic (generated on demand per sample), Python torchvision resnet18
#             (num_classes=10) on a TensorDataset held in memory.
# Metric: steady-state samples/s of the training loop, startup excluded. Each side runs
# W + N + 1 steps of epoch 0 with rank 0 printing a progress line every W steps; the script
# timestamps rank 0's output lines as they arrive (flushed) and takes
#   samples/s = N * batch * 2 / (run time between the lines of steps W and W+N),
# i.e. N steps after W warm-up steps, everything in the loop included (data loading, forward,
# backward, allreduce, optimizer, progress printing). Ours stops via --stop-after-steps (exit 3,
# after a checkpoint that falls outside the timed window).
#
# Paired runs (PAIRED=1; auto = when a cgroup freezer is writable, e.g. as root: the v1 freezer
# at /sys/fs/cgroup/freezer, else cgroup v2's cgroup.freeze; FREEZER=v1|v2 picks one): a single
# run's speed on a shared machine drifts by more than the difference being measured, so the two
# jobs run at the same time, each in its own freezer cgroup. Both start at once; each is frozen
# when it prints its step-W line (start-up and warm-up are not timed), and then they take turns
# of SLICE seconds: one job (every process of it: launcher, coordinator, workers; or mp.spawn's
# parent and children) is frozen while the other runs, so a slow stretch of the machine falls on
# both. Each side's run time is its own unfrozen time only (the turn records), and the per-run
# ratio compares two runs that shared the same minutes; the first turn alternates between the
# sides from run to run. Sequential runs (PAIRED=0): ours, then Python, REPEAT times, wall time.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN=${BUILD_DIR:-build}/bin
[[ $BIN = /* ]] || BIN="$PWD/$BIN"
PY="${DDP_TORCH_PYTHON:-$("$ROOT/scripts/setup-deps.sh" --print-venv)/bin/python}"
RECIPE="$ROOT/bench/trainer/python_recipe.py"
REPEAT=${REPEAT:-3}
SLICE=${SLICE:-1.0}
FMNIST=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
[[ -x $BIN/ddp-trainer ]] || { echo "bench/trainer.sh: $BIN/ddp-trainer not built" >&2; exit 1; }
# Exit codes by name (DDP_EXIT_OK, DDP_EXIT_RESUMABLE) from this build's ddpctl.
# shellcheck source=../slurm/lib/ddp.sh
source "$ROOT/slurm/lib/ddp.sh"
DDP_BIN_DIR=$BIN ddp_load_exit_codes || exit 1
"$PY" -c "import torchvision" 2>/dev/null ||
  { echo "bench/trainer.sh: $PY lacks torchvision (run scripts/setup-deps.sh)" >&2; exit 1; }

# The freezer: KIND (v1: freezer.state FROZEN/THAWED; v2: cgroup.freeze 1/0) and ROOT, the
# hierarchy the jobs' cgroups are made in. can_freeze KIND ROOT: a cgroup made there can freeze.
fz_kind="" fz_root=""
can_freeze() {
  local probe="$2/ddp-bench-probe.$$" ok=0
  mkdir "$probe" 2>/dev/null || return 1
  if [[ $1 == v1 ]]; then [[ -w $probe/freezer.state ]] || ok=1; else [[ -w $probe/cgroup.freeze ]] || ok=1; fi
  rmdir "$probe"; return $ok
}
find_freezer() {
  local kind dev mnt type _
  for kind in ${FREEZER:-v1 v2}; do
    case $kind in
      v1) [[ -d /sys/fs/cgroup/freezer ]] && can_freeze v1 /sys/fs/cgroup/freezer &&
            { fz_kind=v1; fz_root=/sys/fs/cgroup/freezer; return 0; } ;;
      v2) while read -r dev mnt type _; do
            [[ $type == cgroup2 ]] && can_freeze v2 "$mnt" && { fz_kind=v2; fz_root=$mnt; return 0; }
          done </proc/mounts ;;
      *) echo "bench/trainer.sh: FREEZER must be v1 or v2" >&2; exit 1 ;;
    esac
  done
  return 1
}
case ${PAIRED:-auto} in
  1) find_freezer || { echo "bench/trainer.sh: PAIRED=1 needs a writable cgroup freezer (${FREEZER:-v1 or v2}; run as root)" >&2; exit 1; }
     paired=1 ;;
  0) paired=0 ;;
  auto) if find_freezer; then paired=1; else paired=0
          echo "# no writable cgroup freezer (${FREEZER:-v1 or v2}): sequential runs (wall time), not paired" >&2; fi ;;
  *) echo "bench/trainer.sh: PAIRED must be auto, 1 or 0" >&2; exit 1 ;;
esac

tmp=$(mktemp -d)
cgroups=()
cleanup() {
  local cg
  for cg in "${cgroups[@]}"; do
    [[ -d $cg ]] || continue
    thaw "$cg" 2>/dev/null || true
    xargs -r kill -KILL <"$cg/cgroup.procs" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do rmdir "$cg" 2>/dev/null && break; sleep 0.2; done
  done
  [[ -z ${LOGS:-} ]] || { mkdir -p "$LOGS"; cp "$tmp"/*.log "$tmp"/*.turns "$LOGS"/ 2>/dev/null || true; }
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
export OMP_NUM_THREADS=1

# Prefixes each line with the time it arrived (seconds, microsecond resolution).
stamp() { while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done; }

# run_job NAME CG CMD...: runs CMD in $tmp, in freezer cgroup CG unless CG is empty; its output,
# stamped, goes to $tmp/NAME.log and its exit status to $tmp/NAME.rc.
run_job() {
  local name=$1 cg=$2; shift 2
  ( [[ -z $cg ]] || echo "$BASHPID" >"$cg/cgroup.procs"
    rc=0
    cd "$tmp" && "$@" 2>&1 || rc=$?
    echo "$rc" >"$tmp/$name.rc" ) | stamp >"$tmp/$name.log"
}
# The two jobs of a case.
ours() {  # name case batch warmup steps data arch [cg]
  rm -rf "$tmp/ck.$1"
  run_job "$1" "${8:-}" "$BIN/ddp-trainer" --nprocs-per-node 2 --backend gloo --job-id "bench-$1" \
    --dist-file "$tmp/dist_file.$1" --data "$6" --arch "$7" --workers 0 --batch-size "$3" \
    --lr 0.05 --momentum 0.9 --weight-decay 1e-4 --no-eval --print-freq "$4" \
    --stop-after-steps "$(($4 + $5 + 1))" --checkpoint-dir "$tmp/ck.$1" --resume none
}
theirs() {  # name arch batch warmup steps extra [cg]
  run_job "$1" "${7:-}" "$PY" "$RECIPE" "$2" "$3" "$4" "$5" "$4" "$6"
}
check_rc() {  # name ok_codes...
  local name=$1 rc; shift
  rc=$(cat "$tmp/$name.rc" 2>/dev/null || echo "none")
  local ok; for ok in "$@"; do [[ $rc == "$ok" ]] && return 0; done
  tail -20 "$tmp/$name.log" >&2; echo "bench/trainer.sh: $name failed (exit $rc)" >&2; exit 1
}

cg_alive() { [[ -n $(cat "$1/cgroup.procs" 2>/dev/null) ]]; }
frozen() {
  if [[ $fz_kind == v1 ]]; then [[ $(<"$1/freezer.state") == FROZEN ]]; else grep -qx "frozen 1" "$1/cgroup.events"; fi
}
freeze() {
  if [[ $fz_kind == v1 ]]; then echo FROZEN >"$1/freezer.state"; else echo 1 >"$1/cgroup.freeze"; fi
  local s; for ((s = 0; s < 5000; s++)); do frozen "$1" && return; sleep 0.001; done
  echo "bench/trainer.sh: $1 did not freeze" >&2; exit 1
}
thaw() { if [[ $fz_kind == v1 ]]; then echo THAWED >"$1/freezer.state"; else echo 0 >"$1/cgroup.freeze"; fi; }

# line_time LOG STEP: when rank 0's progress line of STEP arrived (empty: not yet).
line_time() {
  awk -v w="$2" 'match($0, /Epoch: \[0\]\[ *[0-9]+\//) {
      i = substr($0, RSTART, RLENGTH); gsub(/[^0-9\/]/, " ", i); split(i, f, " ")
      if (f[2] + 0 == w) { print $1; exit } }' "$1"
}

# span LOG W N [TURNS]: seconds of run time between the progress lines of steps W and W+N;
# with TURNS (lines "start end" of the intervals the job ran), only the time inside them.
span() {
  local t0 t1
  t0=$(line_time "$1" "$2"); t1=$(line_time "$1" "$(($2 + $3))")
  [[ -n $t0 && -n $t1 ]] || return 1
  { if [[ -n ${4:-} ]]; then cat "$4"; else echo "$t0 $t1"; fi; } |
    awk -v t0="$t0" -v t1="$t1" '
      { lo = $1 > t0 ? $1 : t0; hi = $2 < t1 ? $2 : t1; if (hi > lo) s += hi - lo }
      END { if (s <= 0) exit 1; printf "%.6f", s }'
}

# take_turns W CG1 TURNS1 LOG1 CG2 TURNS2 LOG2: first lets both jobs run (at once) until each
# has printed its line of step W, freezing each as it gets there, so that both timed windows
# start together; then runs them SLICE seconds at a time, CG1 first, until both have exited.
# Writes the intervals each ran after its step W to its TURNS file. Once one has exited, the
# other runs alone to its end (the timed windows end close together when the speeds are close).
take_turns() {
  local w=$1 cg=("$2" "$5") turns=("$3" "$6") logs=("$4" "$7") cur=0 start now i t
  local ready=(0 0)
  : >"${turns[0]}"; : >"${turns[1]}"
  while ((ready[0] + ready[1] < 2)); do
    for i in 0 1; do
      ((ready[i])) && continue
      t=$(line_time "${logs[i]}" "$w")
      if [[ -n $t ]] || ! cg_alive "${cg[i]}"; then
        freeze "${cg[i]}"; ready[i]=1
        [[ -z $t ]] || echo "$t $EPOCHREALTIME" >>"${turns[i]}"
      fi
    done
    sleep 0.02
  done
  thaw "${cg[0]}"; start=$EPOCHREALTIME
  while cg_alive "${cg[0]}" || cg_alive "${cg[1]}"; do
    sleep "$SLICE"
    if cg_alive "${cg[1 - cur]}"; then
      freeze "${cg[cur]}"; now=$EPOCHREALTIME
      echo "$start $now" >>"${turns[cur]}"
      cur=$((1 - cur)); thaw "${cg[cur]}"; start=$EPOCHREALTIME
    fi
  done
  echo "$start $EPOCHREALTIME" >>"${turns[cur]}"
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

results=()
bench() {  # case batch warmup steps data arch python_extra
  local c=$1 b=$2 w=$3 n=$4 r o p so sp os=() ps=() rs=()
  for ((r = 1; r <= REPEAT; r++)); do
    local on="$c.ours.$r" pn="$c.py.$r"
    if ((paired)); then
      local cgo="$fz_root/ddp-bench.$$.$on" cgp="$fz_root/ddp-bench.$$.$pn"
      mkdir "$cgo" "$cgp"; cgroups+=("$cgo" "$cgp")
      ours "$on" "$c" "$b" "$w" "$n" "$5" "$6" "$cgo" & local jo=$!
      theirs "$pn" "$6" "$b" "$w" "$n" "$7" "$cgp" & local jp=$!
      local s; for ((s = 0; s < 500; s++)); do  # until both jobs have joined their cgroups
        { cg_alive "$cgo" || [[ -e $tmp/$on.rc ]]; } && { cg_alive "$cgp" || [[ -e $tmp/$pn.rc ]]; } && break
        sleep 0.01
      done
      local jobo=("$cgo" "$tmp/$on.turns" "$tmp/$on.log") jobp=("$cgp" "$tmp/$pn.turns" "$tmp/$pn.log")
      if ((r % 2)); then take_turns "$w" "${jobo[@]}" "${jobp[@]}"; else take_turns "$w" "${jobp[@]}" "${jobo[@]}"; fi
      wait "$jo" "$jp" || true
      rmdir "$cgo" "$cgp"
      check_rc "$on" "$DDP_EXIT_OK" "$DDP_EXIT_RESUMABLE"; check_rc "$pn" 0
      so=$(span "$tmp/$on.log" "$w" "$n" "$tmp/$on.turns") || { echo "no rate in $on.log" >&2; exit 1; }
      sp=$(span "$tmp/$pn.log" "$w" "$n" "$tmp/$pn.turns") || { echo "no rate in $pn.log" >&2; exit 1; }
    else
      ours "$on" "$c" "$b" "$w" "$n" "$5" "$6"; check_rc "$on" "$DDP_EXIT_OK" "$DDP_EXIT_RESUMABLE"
      theirs "$pn" "$6" "$b" "$w" "$n" "$7"; check_rc "$pn" 0
      so=$(span "$tmp/$on.log" "$w" "$n") || { echo "no rate in $on.log" >&2; exit 1; }
      sp=$(span "$tmp/$pn.log" "$w" "$n") || { echo "no rate in $pn.log" >&2; exit 1; }
    fi
    o=$(awk -v s="$so" -v k="$((n * b * 2))" 'BEGIN { printf "%.1f", k / s }')
    p=$(awk -v s="$sp" -v k="$((n * b * 2))" 'BEGIN { printf "%.1f", k / s }')
    os+=("$o"); ps+=("$p"); rs+=("$(awk -v o="$o" -v p="$p" 'BEGIN { printf "%.3f", o / p }')")
    echo "# $c run $r: ours $o samples/s, python $p samples/s, ratio ${rs[-1]}" >&2
  done
  results+=("$(printf '%-9s %5d %4d/%-4d %12.1f %12.1f %7.2f   %s' "$c" "$b" "$n" "$w" \
    "$(printf '%s\n' "${os[@]}" | median)" "$(printf '%s\n' "${ps[@]}" | median)" \
    "$(printf '%s\n' "${rs[@]}" | median)" "$(IFS=' '; echo "${rs[*]}")")")
}

echo "# $( ((paired)) && echo "paired (turns of ${SLICE}s, cgroup $fz_kind freezer)" || echo sequential), $REPEAT run(s) per side;" \
  "load average at start: $(uptime | sed 's/.*load average: //')" >&2
CASES=${CASES:-mlp resnet18}
for c in $CASES; do
  case $c:${QUICK:+quick} in
    mlp:quick) bench mlp 64 20 100 "fashion-mnist:$FMNIST" mlp "$FMNIST" ;;
    mlp:) bench mlp 64 50 400 "fashion-mnist:$FMNIST" mlp "$FMNIST" ;;
    resnet18:quick) bench resnet18 32 3 9 synthetic:2048 resnet18 2048 ;;
    resnet18:) bench resnet18 32 5 40 synthetic:4096 resnet18 4096 ;;
    *) echo "bench/trainer.sh: unknown case '$c' (CASES: mlp resnet18)" >&2; exit 1 ;;
  esac
done
echo "# load average at end: $(uptime | sed 's/.*load average: //')" >&2
printf "%-9s %5s %9s %12s %12s %7s   %s\n" case batch steps/warm ours_samp/s python_samp/s ratio "per-run ratios"
printf "%s\n" "${results[@]}"
