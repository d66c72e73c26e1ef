#!/usr/bin/env bash
# make fuzz: builds the fuzz harnesses with clang + libFuzzer (ASan, UBSan) in build-fuzz/ and
# runs each until it has made FUZZ_RUNS executions (default 10^6) or FUZZ_SECONDS have passed
# (default 600), whichever comes first, starting from the checked-in corpus and regressions.
# Prints the executions each harness made, and fails on the first crash, with the input saved
# under build-fuzz/fuzz/artifacts/ (add it to fuzz/regressions/<name>/ once fixed).
#
#   fuzz/run.sh [HARNESS...]        FUZZ_RUNS=N FUZZ_SECONDS=S FUZZ_JOBS=J BUILD_DIR=build-fuzz
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build-fuzz}"
runs="${FUZZ_RUNS:-1000000}"
seconds="${FUZZ_SECONDS:-600}"
harnesses=("$@")
if ((${#harnesses[@]} == 0)); then
  harnesses=(dist_file idx cifar jpeg status_text status_json job journal)
fi
command -v clang++ >/dev/null || { echo "make fuzz needs clang++ (scripts/setup-deps.sh)" >&2; exit 2; }
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DDDP_WITH_TORCH=OFF -DDDP_FUZZ=ON >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log"; exit 1; }
fi
cmake --build "$build" -j"${FUZZ_JOBS:-$(nproc)}" --target fuzz_all >/dev/null
artifacts="$build/fuzz/artifacts"
mkdir -p "$artifacts"
for h in "${harnesses[@]}"; do
  work="$build/fuzz/corpus/$h"   # grows with what the fuzzer finds; never the checked-in corpus
  mkdir -p "$work"
  inputs=("$root/fuzz/corpus/$h")
  [[ -d "$root/fuzz/regressions/$h" ]] && inputs+=("$root/fuzz/regressions/$h")
  log="$build/fuzz/$h.log"
  start=$(date +%s)
  if ! ASAN_OPTIONS=detect_leaks=0 "$build/fuzz/fuzz_$h" -runs="$runs" -max_total_time="$seconds" \
      -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/$h-" \
      "$work" "${inputs[@]}" >"$log" 2>&1; then
    tail -40 "$log"
    echo "fuzz $h: CRASH (input saved in $artifacts/, log $log)" >&2
    exit 1
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  echo "fuzz $h: ${execs:-?} executions in $(($(date +%s) - start)) s, no crash" \
       "(corpus $(ls "$work" | wc -l) files)"
done
