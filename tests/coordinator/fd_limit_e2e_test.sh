#!/usr/bin/env bash
# A coordinator started with a low soft RLIMIT_NOFILE, as Slurm often starts a task (the
# submitting shell's 1024): 256 simulated workers, one gRPC connection each (ddp-loadgen), against
# a coordinator under `prlimit --nofile=64:4096`.
#   - It raises the soft limit to the hard one, says so in its log, and all 256 register, train
#     and finish (before the raise: "Failed accept4: Too many open files", 0 of 256 registered).
#   - With the hard limit at 64 too, it warns at start, naming the limit and what the job needs,
#     and the job fails at its registration deadline, as it must.
#   - ddp-trainer started the same way raises its own limit (its workers and coordinator inherit).
set -euo pipefail
bin="${DDP_BIN_DIR:?DDP_BIN_DIR is unset (run through ctest)}"
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v prlimit >/dev/null || { echo "SKIP: no prlimit (util-linux)"; exit 77; }
[[ -x "$bin/ddp-loadgen" ]] || { echo "SKIP: ddp-loadgen is not built"; exit 77; }
tmp="$(mktemp -d)"
coord=""
trap '[[ -z "$coord" ]] || kill -9 "$coord" 2>/dev/null || true; rm -rf "$tmp"' EXIT

start() {  # start SOFT:HARD CASE: a coordinator of 256 workers under that limit
  rm -f "$tmp/df"
  prlimit --nofile="$1" "$bin/ddp-coordinator" --world-size 256 --dist-file "$tmp/df" \
    --registration-timeout "$3" --linger 0 --http-port -1 --job-id "fd-$2" >"$tmp/$2.log" 2>&1 &
  coord=$!
  for _ in $(seq 100); do [[ -s "$tmp/df" ]] && return 0; sleep 0.1; done
  cat "$tmp/$2.log"
  fail "$2: no dist_file after 10 s"
}
finish() {  # sets code to the coordinator's exit code
  code=0
  wait "$coord" || code=$?
  coord=""
}

# 1. Soft 64, hard 4096: raised, and every worker trains to the end.
start 64:4096 raised 30
grep -q "^Max open files *4096 *4096" "/proc/$coord/limits" ||
  { cat "/proc/$coord/limits"; fail "raised: the coordinator's soft limit is not 4096"; }
rc=0
timeout 60 "$bin/ddp-loadgen" --workers 256 --channels 256 --per-node 8 --dist-file "$tmp/df" \
  --epochs 1 --steps-per-epoch 3 --steps-per-second 10 --finish >"$tmp/loadgen.log" 2>&1 || rc=$?
finish
grep -v -e " registered " -e ") done$" "$tmp/raised.log" || true  # without the 512 rank lines
tail -3 "$tmp/loadgen.log"
((rc == 0)) || fail "raised: ddp-loadgen exited $rc"
[[ "$code" == 0 ]] || fail "raised: the coordinator exited $code"
grep -q "file descriptors: soft limit raised from 64 to 4096" "$tmp/raised.log" ||
  fail "raised: no log line for the raise"
! grep -q "Too many open files" "$tmp/raised.log" || fail "raised: an accept ran out of descriptors"

# 2. Hard 64: a warning at start, then the registration deadline.
start 64:64 short 3
finish
cat "$tmp/short.log"
grep -q "warning: file descriptors: this process may hold 64 at most (RLIMIT_NOFILE's hard limit is 64); with a connection per rank (a task per GPU) this job needs about 388" "$tmp/short.log" ||
  fail "short: no warning naming the limit and the need"
[[ "$code" == 1 ]] || fail "short: the coordinator exited $code, not 1 (registration timed out)"
# 3. ddp-trainer (the launcher, its workers and its coordinator inherit from it) raises it too.
prlimit --nofile=64:4096 "$bin/ddp-trainer" --data synthetic:20480x1x8x8:10 --arch mlp \
  --epochs 50 --nprocs-per-node 1 --linger 0 --dist-file "$tmp/trainer_df" >"$tmp/trainer.log" 2>&1 &
coord=$!
raised=0
for _ in $(seq 50); do
  grep -q "^Max open files *4096 *4096" "/proc/$coord/limits" 2>/dev/null && { raised=1; break; }
  sleep 0.1
done
kill -TERM "$coord" 2>/dev/null || true
wait "$coord" || true
coord=""
((raised)) || { cat "$tmp/trainer.log"; fail "trainer: the launcher's soft limit is not 4096"; }
echo "PASS"
