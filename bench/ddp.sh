#!/usr/bin/env bash
# Step time of our C++ DDP vs PyTorch's Python DDP: same model, synthetic data, world size,
# one intra-op thread per rank, Gloo on CPU; both measured in this run, paired: the two
# benchmarks run side by side and take turns round by round (C++ first in each round), so a
# slow minute on a shared machine slows both. ratio = python_ms / cpp_ms per round (> 1: we
# are faster); the table shows each side's median round, the median ratio and the middle half
# of the per-round ratios (quartiles).
#   bench/ddp.sh [BUILD_DIR]        (default: build)   QUICK=1: fewer steps and rounds
#   env: ROUNDS (9), ROUNDS_RES (21, for ResNet-18), CASES ("mlp resnet18 tv-resnet18 sweep")
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
PY="${DDP_TORCH_PYTHON:-$("$ROOT/scripts/setup-deps.sh" --print-venv)/bin/python}"
cmake --build "$BUILD" -j2 --target ddp_bench >/dev/null
BIN="$BUILD/bin/ddp_bench"
STEPS_MLP=${QUICK:+20}; STEPS_MLP=${STEPS_MLP:-100}   # steps per round
STEPS_RES=1
ROUNDS=${ROUNDS:-${QUICK:+2}}; ROUNDS=${ROUNDS:-9}
# ResNet-18: one step per round and more rounds; single steps on this kind of shared machine vary
# by +-20% with no change at all, so the median needs many of them.
ROUNDS_RES=${ROUNDS_RES:-${QUICK:+2}}; ROUNDS_RES=${ROUNDS_RES:-21}
TMP=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf "%-11s %-5s %-9s %11s %11s %7s %11s   %s\n" model world bucket_MB python_ms cpp_ms ratio \
  ratio_q1-q3 "cpp: fwd/bwd/wait/opt ms, overlap"
quartiles() { sort -g | awk '{ v[NR] = $1 } END { printf "%.2f-%.2f", v[int((NR + 3) / 4)], v[int((3 * NR + 3) / 4)] }'; }
run() {  # model world bucket steps_per_round warmup batch rounds
  local args=(--model="$1" --world="$2" --bucket_mb="$3" --steps="$4" --warmup="$5" --batch="$6"
              --rounds="$7")
  rm -f "$TMP"/*; mkfifo "$TMP/to_cpp" "$TMP/to_py"
  timeout 1800 "$BIN" "${args[@]}" --handoff="$TMP/to_cpp,$TMP/to_py" >"$TMP/cpp" &
  local cpp_pid=$!
  timeout 1800 "$PY" "$ROOT/bench/ddp/ddp_bench.py" "${args[@]}" \
    --handoff="$TMP/to_py,$TMP/to_cpp" >"$TMP/py" &
  local py_pid=$!
  local go; exec {go}<>"$TMP/to_cpp"   # held open until both finish, so the token is not lost
  printf x >&"$go"
  # Whichever side ends first: on a failure stop the other, which would wait for its turn forever.
  local rc=0 r ended pids=("$cpp_pid" "$py_pid")
  while ((${#pids[@]})); do
    ended=""
    r=0; wait -n -p ended "${pids[@]}" || r=$?
    if ((r != 0)); then
      ((rc)) || rc=$r
      kill "${pids[@]}" 2>/dev/null || true
    fi
    [[ -n $ended ]] || break
    pids=("${pids[@]/$ended/}"); read -ra pids <<<"${pids[*]}"
  done
  exec {go}>&-
  if ((rc != 0)); then echo "bench/ddp.sh: $1 world $2 failed (exit $rc)" >&2; cat "$TMP/cpp" "$TMP/py" >&2; exit 1; fi
  local ratios pm cm cpp
  ratios=$(paste <(grep '^ROUND' "$TMP/py" | field ms_per_step) \
                 <(grep '^ROUND' "$TMP/cpp" | field ms_per_step) | awk '{ print $1 / $2 }')
  pm=$(grep '^ROUND' "$TMP/py" | field ms_per_step | median)
  cm=$(grep '^ROUND' "$TMP/cpp" | field ms_per_step | median)
  cpp=$(grep '^RESULT' "$TMP/cpp")
  printf "%-11s %-5s %-9s %11.2f %11.2f %7.2f %11s   %s/%s/%s/%s, %s\n" "$1" "$2" "$3" "$pm" "$cm" \
    "$(echo "$ratios" | median)" \
    "$(echo "$ratios" | quartiles)" \
    "$(echo "$cpp" | field fwd)" "$(echo "$cpp" | field bwd)" \
    "$(echo "$cpp" | field wait)" "$(echo "$cpp" | field opt)" "$(echo "$cpp" | field overlap)"
}
for c in ${CASES:-mlp resnet18 tv-resnet18 sweep}; do
  case $c in
    mlp) run mlp 2 25 "$STEPS_MLP" 10 64 "$ROUNDS"; run mlp 4 25 "$STEPS_MLP" 10 64 "$ROUNDS" ;;
    resnet18) run resnet18 2 25 "$STEPS_RES" 2 16 "$ROUNDS_RES"
              run resnet18 4 25 "$STEPS_RES" 2 8 "$ROUNDS_RES" ;;
    # ddp-trainer's --arch resnet18 (torchvision's layout) vs torchvision's resnet18
    tv-resnet18) run tv-resnet18 2 25 "$STEPS_RES" 2 32 "$ROUNDS_RES" ;;
    sweep)
      echo "# bucket-size sweep: mlp-large (784-1024x3-10, 11.2 MB of gradients), world 2"
      for b in per-param 1 5 25; do run mlp-large 2 "$b" "$((STEPS_MLP / 4))" 5 64 "$ROUNDS"; done ;;
    *) echo "bench/ddp.sh: unknown case '$c' (CASES: mlp resnet18 tv-resnet18 sweep)" >&2; exit 1 ;;
  esac
done
