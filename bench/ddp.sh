#!/usr/bin/env bash
# Step time of our C++ DDP vs PyTorch's Python DDP: same model, synthetic data, world size,
# one intra-op thread per rank, Gloo on CPU; both measured in this run. Prints a table with
# ratio = python_ms / cpp_ms (> 1: we are faster), medians of REPS (3) alternating runs.
#   bench/ddp.sh [BUILD_DIR]        (default: build)   QUICK=1: fewer steps, one run each
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
PY="${DDP_TORCH_PYTHON:-$("$ROOT/scripts/setup-deps.sh" --print-venv)/bin/python}"
cmake --build "$BUILD" -j2 --target ddp_bench >/dev/null
BIN="$BUILD/bin/ddp_bench"
STEPS_MLP=${QUICK:+20}; STEPS_MLP=${STEPS_MLP:-200}
STEPS_RES=${QUICK:+3}; STEPS_RES=${STEPS_RES:-5}
REPS=${REPS:-${QUICK:+1}}; REPS=${REPS:-3}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf "%-10s %-5s %-9s %11s %11s %7s   %s\n" model world bucket_MB python_ms cpp_ms ratio \
  "cpp: fwd/bwd/wait/opt ms, overlap (last rep)"
# Each configuration runs REPS times, Python and C++ alternating (which one goes first
# alternates too), and the table shows the median step time of each: on a shared 2-core machine
# single runs vary by 30% or more.
run() {  # model world bucket steps warmup batch
  local args=(--model="$1" --world="$2" --bucket_mb="$3" --steps="$4" --warmup="$5" --batch="$6")
  local py="" cpp="" pms=() cms=() r
  for ((r = 0; r < REPS; r++)); do
    if ((r % 2 == 0)); then
      py=$("$PY" "$ROOT/bench/ddp/ddp_bench.py" "${args[@]}" | grep '^RESULT')
      cpp=$("$BIN" "${args[@]}" | grep '^RESULT')
    else
      cpp=$("$BIN" "${args[@]}" | grep '^RESULT')
      py=$("$PY" "$ROOT/bench/ddp/ddp_bench.py" "${args[@]}" | grep '^RESULT')
    fi
    pms+=("$(echo "$py" | field ms_per_step)"); cms+=("$(echo "$cpp" | field ms_per_step)")
  done
  local pm cm
  pm=$(printf "%s\n" "${pms[@]}" | median); cm=$(printf "%s\n" "${cms[@]}" | median)
  printf "%-10s %-5s %-9s %11.2f %11.2f %7.2f   %s/%s/%s/%s, %s\n" "$1" "$2" "$3" "$pm" "$cm" \
    "$(echo "$pm / $cm" | bc -l)" "$(echo "$cpp" | field fwd)" "$(echo "$cpp" | field bwd)" \
    "$(echo "$cpp" | field wait)" "$(echo "$cpp" | field opt)" "$(echo "$cpp" | field overlap)"
}
run mlp 2 25 "$STEPS_MLP" 10 64
run mlp 4 25 "$STEPS_MLP" 10 64
run resnet18 2 25 "$STEPS_RES" 2 16
run resnet18 4 25 "$STEPS_RES" 2 8
echo "# bucket-size sweep: mlp-large (784-1024x3-10, 11.2 MB of gradients), world 2"
for b in per-param 1 5 25; do run mlp-large 2 "$b" "$((STEPS_MLP / 4))" 5 64; done
