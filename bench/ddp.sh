#!/usr/bin/env bash
# Step time of our C++ DDP vs PyTorch's Python DDP: same model, synthetic data, world size,
# one intra-op thread per rank, Gloo on CPU; both measured in this run. Prints a table with
# ratio = python_ms / cpp_ms (> 1: we are faster). Bounded to a few minutes.
#   bench/ddp.sh [BUILD_DIR]        (default: build)   QUICK=1 for fewer steps
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
PY="${DDP_TORCH_PYTHON:-$("$ROOT/scripts/setup-deps.sh" --print-venv)/bin/python}"
cmake --build "$BUILD" -j2 --target ddp_bench >/dev/null
BIN="$BUILD/bin/ddp_bench"
STEPS_MLP=${QUICK:+10}; STEPS_MLP=${STEPS_MLP:-30}
STEPS_RES=${QUICK:+3}; STEPS_RES=${STEPS_RES:-5}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
printf "%-10s %-5s %-9s %11s %11s %7s   %s\n" model world bucket_MB python_ms cpp_ms ratio \
  "cpp: fwd/bwd/wait/opt ms, overlap"
run() {  # model world bucket steps warmup batch
  local args=(--model="$1" --world="$2" --bucket_mb="$3" --steps="$4" --warmup="$5" --batch="$6")
  local py cpp
  py=$("$PY" "$ROOT/bench/ddp/ddp_bench.py" "${args[@]}" | grep '^RESULT')
  cpp=$("$BIN" "${args[@]}" | grep '^RESULT')
  local pms cms
  pms=$(echo "$py" | field ms_per_step); cms=$(echo "$cpp" | field ms_per_step)
  printf "%-10s %-5s %-9s %11.2f %11.2f %7.2f   %s/%s/%s/%s, %s\n" "$1" "$2" "$3" "$pms" "$cms" \
    "$(echo "$pms / $cms" | bc -l)" "$(echo "$cpp" | field fwd)" "$(echo "$cpp" | field bwd)" \
    "$(echo "$cpp" | field wait)" "$(echo "$cpp" | field opt)" "$(echo "$cpp" | field overlap)"
}
run mlp 2 25 "$STEPS_MLP" 5 64
run mlp 4 25 "$STEPS_MLP" 5 64
run resnet18 2 25 "$STEPS_RES" 2 16
run resnet18 4 25 "$STEPS_RES" 2 8
echo "# bucket-size sweep: mlp-large (784-1024x3-10, 11.2 MB of gradients), world 2"
for b in per-param 1 5 25; do run mlp-large 2 "$b" "$STEPS_MLP" 5 64; done
