#!/usr/bin/env bash
# End-to-end training throughput (issue 5): ddp-trainer vs the recipe in Python (DDP +
# DistributedSampler + DataLoader, bench/trainer/python_recipe.py), same model, data, world size,
# batch size, optimizer and threads, both measured in this run. Prints samples/s of each and
# ratio = ours / python (> 1: we are faster). Targets: >= 1.2 on the MLP, >= 1.0 on ResNet-18.
#
#   BUILD_DIR=build-fd bench/trainer.sh        env: REPEAT=1 (runs per side, alternated; the best
#                                              counts)  LOGS=DIR (keep the timestamped logs)  QUICK=1 (fewer steps)
#                                              CASES="mlp resnet18" (which cases, in order)
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
#   samples/s = N * batch * 2 / (t(line of step W+N) - t(line of step W)),
# i.e. N steps after W warm-up steps, everything in the loop included (data loading, forward,
# backward, allreduce, optimizer, progress printing). Ours stops via --stop-after-steps (exit 3,
# after a checkpoint that falls outside the timed window).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN=${BUILD_DIR:-build}/bin
[[ $BIN = /* ]] || BIN="$PWD/$BIN"
PY="${DDP_TORCH_PYTHON:-$("$ROOT/scripts/setup-deps.sh" --print-venv)/bin/python}"
RECIPE="$ROOT/bench/trainer/python_recipe.py"
REPEAT=${REPEAT:-1}
FMNIST=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
[[ -x $BIN/ddp-trainer ]] || { echo "bench/trainer.sh: $BIN/ddp-trainer not built" >&2; exit 1; }
"$PY" -c "import torchvision" 2>/dev/null ||
  { echo "bench/trainer.sh: $PY lacks torchvision (run scripts/setup-deps.sh)" >&2; exit 1; }

tmp=$(mktemp -d)
if [[ -n ${LOGS:-} ]]; then mkdir -p "$LOGS"; trap 'cp "$tmp"/*.ours.* "$tmp"/*.py.* "$LOGS"/ 2>/dev/null; rm -rf "$tmp"' EXIT
else trap 'rm -rf "$tmp"' EXIT; fi
export OMP_NUM_THREADS=1

# Prefixes each line with the time it arrived (seconds, microsecond resolution).
stamp() { while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done; }

# rate LOG W N BATCH: samples/s between the progress lines of steps W and W+N.
rate() {
  awk -v w="$2" -v e="$(($2 + $3))" -v s="$(($3 * $4 * 2))" '
    match($0, /Epoch: \[0\]\[ *[0-9]+\//) {
      i = substr($0, RSTART, RLENGTH); gsub(/[^0-9\/]/, " ", i); split(i, a, " "); step = a[2] + 0
      if (step == w) t0 = $1; if (step == e) t1 = $1
    }
    END { if (t0 == "" || t1 == "" || t1 <= t0) exit 1; printf "%.1f", s / (t1 - t0) }' "$1"
}

ours() {  # case log batch warmup steps data arch
  local rc=0
  rm -rf "$tmp/ck"
  (cd "$tmp" && "$BIN/ddp-trainer" --nprocs-per-node 2 --backend gloo --job-id "bench-$1" \
     --dist-file "$tmp/dist_file.$1" --data "$6" --arch "$7" --workers 0 --batch-size "$3" \
     --lr 0.05 --momentum 0.9 --weight-decay 1e-4 --no-eval --print-freq "$4" \
     --stop-after-steps "$(($4 + $5 + 1))" --checkpoint-dir "$tmp/ck" --resume none 2>&1) |
    stamp >"$2" || rc=$?
  if ((rc != 0 && rc != 3)); then tail -20 "$2" >&2; echo "ddp-trainer failed ($rc)" >&2; exit 1; fi
}

theirs() {  # log arch batch warmup steps extra
  (cd "$tmp" && "$PY" "$RECIPE" "$2" "$3" "$4" "$5" "$4" "$6" 2>&1) | stamp >"$1" ||
    { tail -20 "$1" >&2; echo "python recipe failed" >&2; exit 1; }
}

max() { awk -v a="$1" -v b="$2" 'BEGIN { print (b == "" || a + 0 > b + 0) ? a : b }'; }

results=()
bench() {  # case batch warmup steps data arch python_extra
  local best_o="" best_p="" r o p
  for ((r = 1; r <= REPEAT; r++)); do
    ours "$1" "$tmp/$1.ours.$r" "$2" "$3" "$4" "$5" "$6"
    o=$(rate "$tmp/$1.ours.$r" "$3" "$4" "$2") || { echo "no rate in ours' log" >&2; exit 1; }
    theirs "$tmp/$1.py.$r" "$6" "$2" "$3" "$4" "$7"
    p=$(rate "$tmp/$1.py.$r" "$3" "$4" "$2") || { echo "no rate in python's log" >&2; exit 1; }
    echo "# $1 run $r: ours $o samples/s, python $p samples/s" >&2
    best_o=$(max "$o" "$best_o"); best_p=$(max "$p" "$best_p")
  done
  results+=("$(awk -v c="$1" -v o="$best_o" -v p="$best_p" -v b="$2" -v n="$4" -v w="$3" \
    'BEGIN { printf "%-9s %5d %4d/%-4d %12.1f %12.1f %7.2f", c, b, n, w, o, p, o / p }')")
}

echo "# load average at start: $(uptime | sed 's/.*load average: //')" >&2
CASES=${CASES:-mlp resnet18}
for c in $CASES; do
  case $c:${QUICK:+quick} in
    mlp:quick) bench mlp 64 20 100 "fashion-mnist:$FMNIST" mlp "$FMNIST" ;;
    mlp:) bench mlp 64 50 400 "fashion-mnist:$FMNIST" mlp "$FMNIST" ;;
    resnet18:quick) bench resnet18 32 3 9 synthetic:2048 resnet18 2048 ;;
    resnet18:) bench resnet18 32 5 20 synthetic:4096 resnet18 4096 ;;
    *) echo "bench/trainer.sh: unknown case '$c' (CASES: mlp resnet18)" >&2; exit 1 ;;
  esac
done
echo "# load average at end: $(uptime | sed 's/.*load average: //')" >&2
printf "%-9s %5s %9s %12s %12s %7s\n" case batch steps/warm ours_samp/s python_samp/s ratio
printf "%s\n" "${results[@]}"
