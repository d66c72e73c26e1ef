#!/usr/bin/env bash
# Keeps the control-plane scale benchmark working: bench/loadgen.sh --quick runs 1,024 simulated
# ranks over two client processes (one gRPC connection each, then once more with one connection
# and one call per 8-rank node task) against the real ddp-coordinator in its own process, and the
# C++ TCPStore baseline when it is built (per rank, and as torchrun deploys it: one agent per node
# for the rendezvous); each gRPC run ends with a re-formation after one lost
# rank. Every rank must connect and
# get its rank and shard, no heartbeat may fail, the job must stay RUNNING, the operator's
# GetStatus calls must succeed and the table must print its ratios. Times are printed, never
# asserted: a benchmark is not a timed test. A run above the host's descriptor limit is refused
# up front (exit 3: not run on this host).
set -euo pipefail
bin="${DDP_BIN_DIR:?DDP_BIN_DIR is unset (run through ctest)}"
src="$(cd "$(dirname "$0")/../.." && pwd)"
fail() { echo "FAIL: $*" >&2; exit 1; }

out="$(DDP_BIN_DIR="$bin" bash "$src/bench/loadgen.sh" --quick 2>&1)" || {
  echo "$out"
  fail "bench/loadgen.sh --quick exited non-zero"
}
echo "$out"
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }
g="$(sed -n 's/^grpc-1024: //p' <<<"$out")"
[[ -n "$g" ]] || fail "no ddp-coordinator result"
# Connections: one per rank and one per node task (128 nodes of 8 relay their heartbeats).
for kv in ranks=1024 connect_rank_n=1152 rendezvous_rank_n=1024 heartbeats=node hb_failed=0 \
          hb_aborted=0 job_state=RUNNING unhealthy_ranks=0 status_errors=0; do
  [[ "$(field "${kv%%=*}" "$g")" == "${kv#*=}" ]] || fail "expected $kv, got $(field "${kv%%=*}" "$g")"
done
# The re-formation after one lost rank: every rank in membership generation 1, the job RUNNING,
# no heartbeat lost on the way.
for kv in reformation_rank_n=1024 reformation_generation=1 reformation_restarts=1 \
          reformation_hb_failed=0 reformation_unhealthy_ranks=0 reformation_job_state=RUNNING; do
  [[ "$(field "${kv%%=*}" "$g")" == "${kv#*=}" ]] || fail "expected $kv, got $(field "${kv%%=*}" "$g")"
done
# The per-node path (NODE CALLS): one connection per node task only, every rank through it.
d="$(sed -n 's/^node-1024: //p' <<<"$out")"
[[ -n "$d" ]] || fail "no per-node result"
for kv in calls=node ranks=1024 connect_rank_n=128 rendezvous_rank_n=1024 hb_failed=0 \
          job_state=RUNNING unhealthy_ranks=0 reformation_rank_n=1024 reformation_generation=1 \
          reformation_hb_failed=0 reformation_job_state=RUNNING; do
  [[ "$(field "${kv%%=*}" "$d")" == "${kv#*=}" ]] || fail "per node: expected $kv, got $(field "${kv%%=*}" "$d")"
done
# Every rank held its rank before it held its shard: the rank-only time is there and no longer.
awk -v r="$(field rendezvous_ranked_s "$d")" -v t="$(field rendezvous_s "$d")" \
  'BEGIN { exit !(r != "" && r > 0 && r <= t) }' ||
  fail "per node: rendezvous_ranked_s '$(field rendezvous_ranked_s "$d")' not in (0, rendezvous_s]"
grep -q "1024 ranks: connect [0-9.]*x, rendezvous [0-9.]*x, re-formation [0-9.]*x" <<<"$out" ||
  fail "no per-rank / per-node ratio line"
awk -v n="$(field status_n "$g")" 'BEGIN { exit !(n > 10) }' || fail "too few GetStatus samples"
# 1,024 ranks at 1 Hz: well above a quarter of that unless heartbeats stopped.
awk -v r="$(field hb_per_s "$g")" 'BEGIN { exit !(r > 256) }' || fail "heartbeat rate $(field hb_per_s "$g")/s"
awk -v c="$(field coord_pct_core_per_1k_hbps "$g")" 'BEGIN { exit !(c > 0) }' || fail "no CPU figure"
# The host's share of the rendezvous (idle and stolen CPU seconds) and the server's peak memory.
for k in rendezvous_host_idle_s rendezvous_host_steal_s; do
  [[ "$(field "$k" "$g")" =~ ^[0-9.e+-]+$ ]] || fail "no $k figure: $(field "$k" "$g")"
done
awk -v m="$(field server_peak_rss_mib "$g")" 'BEGIN { exit !(m > 10) }' ||
  fail "server peak RSS $(field server_peak_rss_mib "$g") MiB"
if [[ -x "$bin/ddp-tcpstore-bench" ]]; then
  t="$(sed -n 's/^cpp-1024: //p' <<<"$out")"
  [[ "$(field rendezvous_rank_n "$t")" == 1024 ]] || fail "TCPStore baseline: $t"
  grep -q "1024 ranks, TCPStore C++ client: connect [0-9.]*x, rendezvous [0-9.]*x" <<<"$out" ||
    fail "no ratio line"
  # torchrun as deployed: one store client per 8-rank node for the rendezvous.
  a="$(sed -n 's/^agents-1024: //p' <<<"$out")"
  [[ "$(field rendezvous_rank_n "$a")" == 128 ]] || fail "torchrun agents baseline: $a"
  grep -q "1024 ranks (128 nodes): rendezvous from the last node connected: torchrun agents [0-9.]* s, ours [0-9.]* s: [0-9.]*x" <<<"$out" ||
    fail "no as-deployed rendezvous line"
  grep -q "1024 ranks (128 nodes): every rank holding its rank (no shard), from the last node connected: torchrun agents [0-9.]* s, ours [0-9.]* s: [0-9.]*x" <<<"$out" ||
    fail "no as-deployed rank-only line"
  grep -q "1024 ranks: from the last node connected to every worker ready for its process group's store: torchrun [0-9.]* s (agents' rendezvous [0-9.]* + workers' store clients [0-9.]*), ours [0-9.]* s .*: [0-9.]*x; the server's CPU in it: TCPStore [0-9.]* s, ddp-coordinator [0-9.]* s" <<<"$out" ||
    fail "no as-deployed line from the last node connected"
  grep -q "1024 ranks: from the first connect to every worker ready for its process group's store: torchrun [0-9.]* s .*, ours [0-9.]* s .*: [0-9.]*x" <<<"$out" ||
    fail "no as-deployed start-up line"
fi
# A run the host cannot hold is refused up front, as "not run on this host" (exit 3), which
# bench/loadgen.sh lists apart from failures: 1,024 ranks per rank need 1,152 connections, an
# eighth more and 256 to spare, above a hard descriptor limit of 1,024.
if command -v prlimit >/dev/null; then
  rc=0
  refusal="$(prlimit --nofile=1024:1024 "$bin/ddp-scalebench" --target grpc --ranks 1024 2>&1)" || rc=$?
  [[ $rc == 3 ]] || { echo "$refusal"; fail "a run above the descriptor limit exited $rc, not 3"; }
  grep -q "^ddp-scalebench: not run on this host: 1024 ranks need 1552 descriptors in the server process (1152 connections, .*); RLIMIT_NOFILE's hard limit here is 1024$" <<<"$refusal" ||
    fail "unexpected refusal: $refusal"
else
  echo "SKIPPED the descriptor-limit refusal: no prlimit (util-linux)"
fi
echo "ok: scale benchmark smoke run"
