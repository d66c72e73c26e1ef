#!/usr/bin/env bash
# ddpctl against a real ddp-coordinator with simulated workers (ddp-loadgen): status (human and
# JSON), watch until the job ends (exit code = outcome), stop graceful (workers get
# CHECKPOINT_AND_STOP, report CANCELLED, job ends stopped: exit resumable) and --now (ABORT),
# the error paths (no dist_file, missing file, wrong token, stale file of a killed coordinator,
# coordinator killed during watch), each within seconds and in one line, and the two script
# subcommands: exit-codes (common/exit_codes.h) and dist-file. Exit codes are read by name.
source "$(dirname "$0")/../ops/lib.sh"
ctl() { "$bin/ddpctl" --dist-file "$df" "$@"; }
elapsed_ok() { (($(date +%s) - $1 <= $2)) || fail "$3 took more than $2 s"; }

# --- status, human and JSON; watch until SUCCEEDED (exit 0) ---------------------------------
start_coordinator ok 8
start_workers ok 8 --steps-per-second 20 --epochs 2 --steps-per-epoch 40 --finish --lag-rank 5
wait_running
sleep 1.5
human="$(ctl status)"
grep -q "RUNNING" <<<"$human" || fail "status: no RUNNING in: $human"
grep -q "RANK" <<<"$human" || fail "status: no rank table"
grep -q "8/8 registered" <<<"$human" || fail "status: registration line"
grep -Eq '^5 .*<< behind by' <<<"$human" || fail "status: lagging rank 5 not flagged: $human"
grep -q "recent events" <<<"$human" || fail "status: no events"
json="$(ctl status --json)"
python3 - "$json" <<'PY' || fail "status --json contract"
import json, sys
s = json.loads(sys.argv[1])
for k in ["job_id", "state", "world_size", "registered", "epoch", "epochs", "step",
          "steps_per_epoch", "loss", "samples_per_second", "ranks", "failed_rank",
          "failure_reason"]:
    assert k in s, k
assert s["job_id"] == "ok" and s["state"] == "RUNNING" and s["world_size"] == 8, s
assert len(s["ranks"]) == 8
for r in s["ranks"]:
    for k in ["rank", "host", "local_rank", "state", "step", "last_seen_seconds"]:
        assert k in r, k
PY
pass "status human + json"
out="$(ctl watch 2>&1)" && rc=0 || rc=$?
[[ $rc -eq $DDP_EXIT_OK ]] || fail "watch on a succeeding job: exit $rc: $out"
grep -q "SUCCEEDED" <<<"$out" || fail "watch: no SUCCEEDED line: $out"
grep -q "event .*job SUCCEEDED" <<<"$out" || fail "watch: events not streamed"
pass "watch ends with the job, exit $DDP_EXIT_OK"
wait "$coord_pid" && rc=0 || rc=$?
[[ $rc -eq $DDP_EXIT_OK ]] || fail "coordinator exit $rc"

# --- stop (graceful): CHECKPOINT_AND_STOP, workers report CANCELLED, exit resumable ----------
start_coordinator graceful 8
start_workers graceful 8 --steps-per-second 5 --epochs 100
wait_running
ctl watch >"$work/watch.out" 2>&1 &
watch_pid=$!
pids+=("$watch_pid")
sleep 1
start=$(date +%s)
# The reason of issue 16: 4087 ASCII bytes and four two-byte characters, which a cut at byte
# 4096 of "ddpctl: <reason>" used to split, breaking every later status and heartbeat reply.
reason="$(printf 'a%.0s' $(seq 4087))éééé"
out="$(ctl stop --reason "$reason" 2>&1)" && rc=0 || rc=$?
[[ $rc -eq $DDP_EXIT_OK ]] || fail "stop: exit $rc: $out"
elapsed_ok "$start" 10 "graceful stop"
grep -q "CHECKPOINT_AND_STOP" <<<"$out" || fail "stop: does not say what it asked: $out"
grep -q "8/8 rank(s) stopped" <<<"$out" || fail "stop: no acknowledgement count: $out"
grep -q "stopped: every rank checkpointed" <<<"$out" || fail "stop: no final line: $out"
wait "$watch_pid" && rc=0 || rc=$?
[[ $rc -eq $DDP_EXIT_RESUMABLE ]] ||
  fail "watch after a graceful stop: exit $rc (want $DDP_EXIT_RESUMABLE): $(cat "$work/watch.out")"
wait "$coord_pid" && rc=0 || rc=$?
[[ $rc -eq $DDP_EXIT_RESUMABLE ]] ||
  fail "coordinator after a graceful stop: exit $rc (want $DDP_EXIT_RESUMABLE)"
wait "$workers_pid" || true
grep -q "reported_done=8" "$work/graceful.workers.log" ||
  fail "workers did not all report done: $(cat "$work/graceful.workers.log")"
grep -q "stopped after checkpoint" "$work/graceful.coord.log" ||
  fail "coordinator did not log the CANCELLED reports"
pass "stop: graceful (a 4 KiB reason ending in multi-byte characters), watch exits $DDP_EXIT_RESUMABLE"

# --- stop --now: ABORT -----------------------------------------------------------------------
LINGER=10 start_coordinator now 8
start_workers now 8 --steps-per-second 5 --epochs 100
wait_running
out="$(ctl stop --now --reason "bad lr" 2>&1)" && rc=0 || rc=$?
[[ $rc -eq $DDP_EXIT_OK ]] || fail "stop --now: exit $rc: $out"
grep -q "ABORT" <<<"$out" || fail "stop --now: $out"
grep -q "aborted: every rank received ABORT" <<<"$out" || fail "stop --now: no ack: $out"
wait "$workers_pid" || true
grep -q "aborted=8" "$work/now.workers.log" || fail "workers: $(cat "$work/now.workers.log")"
json="$(ctl status --json)"
grep -q '"state":"FAILED"' <<<"$json" || fail "after --now: $json"
grep -q 'stopped by operator: ddpctl: bad lr' <<<"$json" || fail "reason: $json"
out="$(ctl stop 2>&1)" && rc=0 || rc=$?
[[ $rc -eq $DDP_EXIT_FAILED ]] && grep -q "already finished" <<<"$out" || fail "stop on a finished job: $rc $out"
kill "$coord_pid"
wait "$coord_pid" || true
pass "stop --now aborts"

# --- errors ------------------------------------------------------------------------------------
out="$(env -u DDP_DIST_FILE "$bin/ddpctl" status 2>&1)" && rc=0 || rc=$?
[[ $rc -eq $DDP_EXIT_FAILED ]] && grep -q -- "--dist-file" <<<"$out" || fail "no job: $rc $out"
start=$(date +%s)
out="$("$bin/ddpctl" --dist-file "$work/nope" status 2>&1)" && rc=0 || rc=$?
[[ $rc -eq $DDP_EXIT_FAILED ]] && grep -q "nope" <<<"$out" || fail "missing dist_file: $rc $out"
elapsed_ok "$start" 2 "missing dist_file"
[[ $(wc -l <<<"$out") -eq 1 ]] || fail "missing dist_file: not one line: $out"

start_coordinator errs 8
# A copy of the dist_file with another token, written from the fields ddpctl reads.
eval "$(ctl dist-file --with-token)"
(umask 077 && printf 'slurm-ddp-dist-file v1\njob_id=%s\ngeneration=%s\nnonce=%s\ntoken=%s\ngrpc_address=%s\nhttp_port=%s\ntls_cert=%s\nend=1\n' \
  "$job_id" "$generation" "$nonce" "$(printf 'f%.0s' $(seq 64))" "$grpc_address" "$http_port" \
  "$(dist_value tls_cert | base64 -w0)" >"$work/forged")
[[ "$token" == "$(dist_value token)" && "$token" != "$(printf 'f%.0s' $(seq 64))" ]] || fail "dist-file token"
out="$("$bin/ddpctl" --dist-file "$work/forged" status 2>&1)" && rc=0 || rc=$?
[[ $rc -eq $DDP_EXIT_FAILED ]] && grep -q "token" <<<"$out" || fail "wrong token: $rc $out"
[[ $(wc -l <<<"$out") -eq 1 ]] || fail "wrong token: not one line: $out"
dist_value tls_cert >"$work/job.pem"
out="$("$bin/ddpctl" --address "$(dist_value grpc_address)" --tls-cert "$work/job.pem" --token wrong \
  status 2>&1)" && rc=0 || rc=$?
[[ $rc -eq $DDP_EXIT_FAILED ]] && grep -q "token" <<<"$out" || fail "wrong --token: $rc $out"
# Without the job's certificate an address is refused before anything is sent.
out="$("$bin/ddpctl" --address "$(dist_value grpc_address)" --token "$(dist_value view_token)" status 2>&1)" &&
  rc=0 || rc=$?
[[ $rc -eq $DDP_EXIT_FAILED ]] && grep -q "certificate" <<<"$out" || fail "address without certificate: $rc $out"
# Tokens from files, never on the command line: the token, then the job's certificate. The
# dashboard URL carries the view token even when ddpctl was given the control token.
tok_file() { dist_value "$1" && dist_value tls_cert; }
(umask 077 && tok_file control_token >"$work/control.tok" && tok_file view_token >"$work/view.tok" &&
  tok_file token >"$work/worker.tok")
out="$("$bin/ddpctl" --address "$(dist_value grpc_address)" --token-file "$work/control.tok" dashboard)"
[[ "$out" == "http://127.0.0.1:$(dist_value http_port)/?token=$(dist_value view_token)" ]] ||
  fail "dashboard via --address: $out"
[[ "$(ctl dashboard)" == "$out" ]] || fail "dashboard via dist_file"
grep -q "$(dist_value control_token)\|$(dist_value token)" <<<"$out" && fail "dashboard URL leaks a token"
# A view token can look but not stop; a worker token can do neither.
"$bin/ddpctl" --address "$(dist_value grpc_address)" --token-file "$work/view.tok" status >/dev/null ||
  fail "status with the view token"
out="$("$bin/ddpctl" --address "$(dist_value grpc_address)" --token-file "$work/view.tok" stop 2>&1)" &&
  rc=0 || rc=$?
[[ $rc -eq $DDP_EXIT_FAILED ]] && grep -q "needs the control token; this is the view token" <<<"$out" ||
  fail "stop with the view token: $rc $out"
out="$("$bin/ddpctl" --address "$(dist_value grpc_address)" --token-file "$work/worker.tok" status 2>&1)" &&
  rc=0 || rc=$?
[[ $rc -eq $DDP_EXIT_FAILED ]] && grep -q "needs a view or control token" <<<"$out" ||
  fail "status with the worker token: $rc $out"
chmod 644 "$work/view.tok"
out="$("$bin/ddpctl" --address "$(dist_value grpc_address)" --token-file "$work/view.tok" status 2>&1)" &&
  rc=0 || rc=$?
[[ $rc -eq $DDP_EXIT_FAILED ]] && grep -q "chmod 600" <<<"$out" || fail "token file readable by others: $rc $out"
ctl status --json | grep -q '"state":"REGISTERING"' || fail "the refused stop changed the job"
pass "errors: no job, missing file, wrong token; token files by role; view-only dashboard URL"

ctl watch >"$work/watch2.out" 2>&1 &
watch_pid=$!
pids+=("$watch_pid")
sleep 1
kill -9 "$coord_pid"
start=$(date +%s)
wait "$watch_pid" && rc=0 || rc=$?
elapsed_ok "$start" 10 "watch after the coordinator died"
[[ $rc -eq $DDP_EXIT_FAILED ]] && grep -q "coordinator" "$work/watch2.out" ||
  fail "watch, coordinator killed: $rc $(cat "$work/watch2.out")"
start=$(date +%s)
out="$(ctl --timeout 2 status 2>&1)" && rc=0 || rc=$?
elapsed_ok "$start" 5 "stale dist_file"
[[ $rc -eq $DDP_EXIT_FAILED ]] && grep -q "stale" <<<"$out" || fail "stale dist_file: $rc $out"
[[ $(wc -l <<<"$out") -eq 1 ]] || fail "stale: not one line: $out"
pass "coordinator killed: watch and status fail within seconds"

# --- the script subcommands ------------------------------------------------------------------
# exit-codes prints exactly the table of common/exit_codes.h, and `eval` defines it.
header="$(dirname "$0")/../../common/exit_codes.h"
want="$(grep -oE '\{"DDP_EXIT_[A-Z_]+", kExit[A-Za-z]+' "$header" | while read -r name const; do
  name=${name#\{\"}; name=${name%\",}
  echo "$name=$(grep -oE "constexpr int $const = [0-9]+" "$header" | grep -oE '[0-9]+$')"
done)"
got="$("$bin/ddpctl" exit-codes)"
[[ -n "$want" && "$got" == "$want" ]] || fail "exit-codes: got [$got], header says [$want]"
[[ $(sort -u -t= -k2,2 <<<"$got" | wc -l) -eq $(wc -l <<<"$got") ]] || fail "exit-codes: values not distinct: $got"
(eval "$got" && [[ -n "$DDP_EXIT_TIMED_OUT" ]]) || fail "exit-codes: not eval-able"
"$bin/ddpctl" exit-codes --explain | grep -q "DDP_EXIT_RESUMABLE=.*# .*resumable" || fail "exit-codes --explain"
pass "exit-codes: the header's table, eval-able"

# dist-file: every field but the token unless asked; bare values with --field; checked like a
# worker checks the file (a group-readable copy is refused); --wait for a file still to come.
start_coordinator fields 2
out="$(ctl dist-file)"
for k in job_id generation nonce grpc_address http_port; do
  grep -q "^$k=" <<<"$out" || fail "dist-file: no $k in: $out"
done
grep -q "token" <<<"$out" && fail "dist-file printed the token unasked: $out"
[[ "$(ctl dist-file --field job_id)" == fields ]] || fail "dist-file --field job_id"
[[ "$(ctl dist-file --field grpc_address)" == 127.0.0.1:* ]] || fail "dist-file --field grpc_address"
[[ "$(ctl dist-file --field token)" =~ ^[0-9a-f]{64}$ ]] || fail "dist-file --field token"
[[ "$(ctl dist-file --with-token | grep -c '^token=')" -eq 1 ]] || fail "dist-file --with-token"
out="$(ctl dist-file --field bogus 2>&1)" && rc=0 || rc=$?
[[ $rc -eq $DDP_EXIT_FAILED ]] && grep -q "one of: job_id" <<<"$out" || fail "dist-file bogus field: $rc $out"
out="$(ctl --job-id other dist-file 2>&1)" && rc=0 || rc=$?
[[ $rc -eq $DDP_EXIT_FAILED ]] || fail "dist-file of another job: $rc $out"
cp "$df" "$work/readable" && chmod 644 "$work/readable"
out="$("$bin/ddpctl" --dist-file "$work/readable" dist-file 2>&1)" && rc=0 || rc=$?
[[ $rc -eq $DDP_EXIT_FAILED ]] && grep -q "0600" <<<"$out" || fail "dist-file group-readable: $rc $out"
( sleep 1; cp -p "$df" "$work/later.tmp" && mv "$work/later.tmp" "$work/later" ) &
pids+=("$!")
start=$(date +%s)
[[ "$("$bin/ddpctl" --dist-file "$work/later" dist-file --wait 10 --field job_id)" == fields ]] ||
  fail "dist-file --wait"
elapsed_ok "$start" 5 "dist-file --wait"
out="$("$bin/ddpctl" --dist-file "$work/never" dist-file --wait 0.5 2>&1)" && rc=0 || rc=$?
[[ $rc -eq $DDP_EXIT_FAILED ]] || fail "dist-file --wait on a missing file: $rc $out"
pass "dist-file: fields, token on request, checks, --wait"
echo "PASS"
