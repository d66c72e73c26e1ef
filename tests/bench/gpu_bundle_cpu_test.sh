#!/usr/bin/env bash
# The GPU bundle from a clean folder, on a machine without a GPU. scripts/gpu-bundle.sh packs this
# build; a copy of the bundle in a new folder, outside the source tree, runs bench/gpu/run.sh with
# DEVICE=cpu in a bare environment (PATH, HOME and the python that has torch, nothing else):
#   - every library of the bundle's binaries resolves into the bundle, the machine's torch or the
#     C/C++ runtime, never into this machine's own gRPC, protobuf, abseil, ...;
#   - every check that runs on the CPU passes (Gloo world 2, equivalence with Python DDP, stop and
#     resume, in-job recovery after a SIGKILL, training from generated JPEGs);
#   - every check that needs a GPU says SKIP and why; none fails.
# Then a bundle with one of its libraries removed must fail the env check, naming that library
# (it is installed here, so only the check sees that the bundle lacks it).
set -euo pipefail
bin="${DDP_BIN_DIR:?DDP_BIN_DIR is unset (run through ctest)}"
py="${DDP_TORCH_PYTHON:?DDP_TORCH_PYTHON is unset (run through ctest)}"
src="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "$bin/.." && pwd)"
fail() { echo "FAIL: $*" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
BUILD_DIR="$build" bash "$src/scripts/gpu-bundle.sh" "$tmp/made" > "$tmp/bundle.log" 2>&1 ||
  { cat "$tmp/bundle.log"; fail "scripts/gpu-bundle.sh failed"; }
cat "$tmp/bundle.log"
mkdir "$tmp/clean"
cp -a "$tmp/made" "$tmp/clean/bundle"
rm -rf "$tmp/made"

run_bundle() {  # bundle-dir out-dir [VAR=value...]: run.sh in a bare environment
  local dir=$1 out=$2
  shift 2
  (cd "$tmp/clean" && env -i HOME="$tmp/clean" PATH=/usr/bin:/bin DEVICE=cpu PY="$py" \
    PYTHON="$py" OUT="$out" "$@" bash "$dir/bench/gpu/run.sh")
}
# result of one check in the final table ("| name | RESULT | figure | detail")
result() { awk -F'|' -v c="$1" '{gsub(/ /, "", $2); gsub(/ /, "", $3)} $2 == c {print $3}' <<<"$2"; }

out="$(run_bundle "$tmp/clean/bundle" "$tmp/clean/out" 2>&1)" || { echo "$out"; fail "run.sh exited non-zero"; }
echo "$out"
table="$(sed -n '/^== slurm-ddp GPU check table/,$p' <<<"$out")"
[[ -n "$table" ]] || fail "run.sh printed no table"
for c in env gloo_cuda_w2 equiv_gloo_w2 stop_resume recover_cuda jpeg:cpu-train; do
  [[ "$(result "$c" "$table")" == PASS ]] ||
    { tail -20 "$tmp/clean/out/${c%%:*}.log" 2>/dev/null || true; fail "$c: expected PASS, got '$(result "$c" "$table")'"; }
done
for c in equiv_nccl nccl_kill bn_relu step e2e_resnet50 jpeg; do
  [[ "$(result "$c" "$table")" == SKIP ]] || fail "$c: expected SKIP, got '$(result "$c" "$table")'"
  grep -q "^| $c .*| SKIP .*DEVICE=cpu: ." <<<"$table" || fail "$c: SKIP without a reason"
done
! grep -q '| FAIL ' <<<"$table" || fail "a check failed"
# The equivalence with Python DDP is a figure, not only a word: the weights agree within 1e-4.
dw="$(grep '^| equiv_gloo_w2 ' <<<"$table" | sed -n 's/.*max_dw=\([^ |]*\).*/\1/p')"
awk -v d="$dw" 'BEGIN { exit !(d != "" && d + 0 <= 1e-4) }' || fail "equiv_gloo_w2: max_dw '$dw'"

# A bundle missing one of its libraries: found on this machine, so only the check can see it.
cp -a "$tmp/clean/bundle" "$tmp/clean/broken"
lib="$(cd "$tmp/clean/broken/lib" && ls libgrpc++.so.* 2>/dev/null | head -1 || true)"
[[ -n "$lib" ]] || fail "the bundle has no libgrpc++"
rm "$tmp/clean/broken/lib/$lib"
out="$(run_bundle "$tmp/clean/broken" "$tmp/clean/out-broken" CHECKS=env 2>&1)" || true
grep -q "^| env .*| FAIL .*$lib=" <<<"$out" ||
  { echo "$out"; fail "env did not fail on the bundle without $lib"; }
echo "PASS: the bundle runs the CPU checks from a clean folder; without $lib its env check fails"
