#!/usr/bin/env bash
# The coordinator's allocator, like for like: the build's ddp-coordinator (linked with tcmalloc,
# coordinator/CMakeLists.txt) against the same object files relinked without it (glibc's malloc),
# run in alternation by ddp-scalebench at N ranks with everything else the same (the same
# ddp-rankgen clients, one connection per rank, the same phases). Prints each run, then the means
# and their ratio (glibc / tcmalloc; above 1x: tcmalloc faster). About 25 s a run at 16,384.
#   bench/allocator.sh [ROUNDS] [N]      (default: 4 16384)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/${BUILD_DIR:-build}"   # BUILD_DIR: relative to the source root
rounds="${1:-4}"
n="${2:-16384}"
link="$build/coordinator/CMakeFiles/ddp-coordinator.dir/link.txt"
[[ -f "$link" && -x "$build/bin/ddp-scalebench" ]] ||
  { echo "allocator.sh: build first (make build)" >&2; exit 1; }
lib="$(grep -o '[^ ]*libtcmalloc_minimal[^ ]*' "$link" | head -1)" ||
  { echo "allocator.sh: $build's ddp-coordinator does not link tcmalloc (a sanitizer build?)" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/ddp-allocator-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# The glibc variant: a bin folder like the build's, whose ddp-coordinator is relinked from the
# same objects with the same command, less the tcmalloc library.
mkdir "$work/glibc"
for f in "$build/bin"/*; do ln -s "$f" "$work/glibc/"; done
rm "$work/glibc/ddp-coordinator"
cmd="$(sed -e "s|$lib||" -e "s| -o [^ ]*ddp-coordinator | -o $work/glibc/ddp-coordinator |" "$link")"
(cd "$build/coordinator" && eval "$cmd")
if ldd "$work/glibc/ddp-coordinator" | grep -q tcmalloc; then
  echo "allocator.sh: the relinked coordinator still loads tcmalloc" >&2; exit 1
fi

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }
rows="$work/rows"
echo "== $(nproc) cpus ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)); $n ranks, $rounds rounds, alternating"
printf "%-9s %-13s %-14s %-16s %-12s %-10s %-10s\n" malloc rendezvous_s rdzv_srv_cpu %core/1k_hb/s srv_peak_mib hb_failed rdzv_steal
for _ in $(seq "$rounds"); do
  for variant in tcmalloc glibc; do
    dir="$build/bin"; [[ $variant == glibc ]] && dir="$work/glibc"
    r="$("$build/bin/ddp-scalebench" --target grpc --ranks "$n" --window 2 --warmup 1 \
          --bin-dir "$dir" 2>"$work/scalebench.err")" || true
    if [[ "$r" != ok* ]]; then
      echo "allocator.sh: $variant run failed: $(field error "$r") $(tail -1 "$work/scalebench.err")" >&2
      exit 1
    fi
    printf "%-9s %-13s %-14s %-16s %-12s %-10s %-10s\n" "$variant" "$(field rendezvous_s "$r")" \
      "$(field rendezvous_server_cpu_s "$r")" "$(field coord_pct_core_per_1k_hbps "$r")" \
      "$(field server_peak_rss_mib "$r")" "$(field hb_failed "$r")" "$(field rendezvous_host_steal_s "$r")" |
      tee -a "$rows"
  done
done
awk '{ t[$1] += $2; c[$1] += $3; k[$1]++ }
     END {
       printf "means: tcmalloc %.3f s (server CPU %.2f s), glibc %.3f s (server CPU %.2f s)\n",
              t["tcmalloc"] / k["tcmalloc"], c["tcmalloc"] / k["tcmalloc"],
              t["glibc"] / k["glibc"], c["glibc"] / k["glibc"]
       printf "rendezvous ratio (glibc / tcmalloc, same objects, clients and phases): %.2fx\n",
              (t["glibc"] / k["glibc"]) / (t["tcmalloc"] / k["tcmalloc"])
     }' "$rows"
awk '$6 != 0 { bad = 1 } END { exit bad }' "$rows" ||
  { echo "allocator.sh: a heartbeat failed in a run above" >&2; exit 1; }
