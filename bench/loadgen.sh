#!/usr/bin/env bash
# Control plane at scale, like for like: ddp-coordinator against PyTorch's TCPStore, every
# server in its own process, the simulated ranks spread over several client processes with one
# connection per rank, the same phases timed the same way (bench/loadgen/scale_run.h):
#   connect     every rank connected and answered once (gRPC: Hello; TCPStore: its handshake)
#   rendezvous  every rank holds its rank and its shard (gRPC: Register + GetShard; TCPStore:
#               add / set / add / wait / get)
# and, for ddp-coordinator only, a heartbeat window (every rank heartbeating at the interval the
# coordinator gives it: 1 s up to 4,096 ranks, 2.5 s at 16,384 with the default 10 s timeout;
# as ddp-trainer's node tasks do, the 8 ranks of a simulated node send one NodeHeartbeat on the
# node task's own connection; the coordinator's CPU from /proc) and a status window (GetStatus
# p50/p99 from an operator process while every rank heartbeats) and a re-formation (one rank
# lost, its replacement registers, every other rank rejoins the next membership generation, each
# fetches its shard; timed from the driver's command to the last rank holding them, the
# simulated calls' contexts and requests made before it, untimed); then the status snapshot's
# rendering, full against incremental (ddp-renderbench), at each size. Every agent process, of
# either baseline, makes its heap resident before it reports ready (--heap-reserve-kib,
# common/heap_reserve.h); the servers run with their own defaults: ddp-coordinator with the
# tcmalloc it links (coordinator/CMakeLists.txt), TCPStore's servers with glibc's malloc, as
# PyTorch's wheel ships them.
#
#   bench/loadgen.sh [--quick] [--no-python] [--python-max N] [--resolver] [--plaintext]
#                  [--no-tcpstore] [N...]   (default sizes: 1024 4096 16384)
#     --quick      1024 ranks, 3 s windows, C++ TCPStore only (the CI smoke test runs this)
#     --no-python  skip the Python TCPStore baseline
#     --python-max the largest size the Python baseline runs at (default 4096: at 16384 its
#                  Python threads keep a load average above 100 on a shared 2-core host)
#     --resolver   also time TCPStore's connect with this host's resolver as it is, at the first
#                  size (see docs/bench-status.md: c10d looks up every socket address in DNS)
#     --plaintext  also run ddp-coordinator without TLS at each size (ddp-scalebench --plaintext,
#                  a benchmark-only switch: no client of the product talks to such a server), and
#                  print what TLS costs, like for like in the same run
#     --no-tcpstore skip both TCPStore baselines
#     --reform-all-shards  in the re-formation every rank fetches its shard again (default: the
#                  replacement, and a survivor whose rank or world size changed, as ddp-trainer's
#                  workers do: they ask for a shard at an epoch's start or as a new process)
#     --no-node-calls skip the per-node runs (NODE CALLS: each 8-rank node task carries its ranks'
#                  Register, GetShard, Rejoin and heartbeats in one call per node over its one
#                  connection, the ranks open none; the default runs them beside the per-rank runs)
#     --node-shard-call  the per-node runs' start-up fetches the shards in a NodeGetShard after
#                  the NodeRegister, as ddp-trainer does for a run that resumes from a checkpoint
#                  (default: each Register carries its first GetShard, as ddp-trainer's workers
#                  of a run that starts fresh do, RegisterRequest.first_shard; one call per node)
#     --c10d-max N torchrun's own dynamic rendezvous (bench/loadgen/torchrun_c10d_rendezvous.py:
#                  PyTorch's DynamicRendezvousHandler, c10d backend, one handler per 8-rank node)
#                  at the sizes up to N ranks (default 1024; 0: never; not with --quick). Its
#                  Python agents' CPU grows with the square of the agents here: at 256 agents
#                  (2,048 ranks) on 2 cores it did not finish (docs/bench-status.md)
#
# As each system is deployed: ddp-trainer's node tasks carry their workers' calls (the per-node
# runs); torchrun runs one agent per node, whose rendezvous over TCPStore gives every worker its
# rank (the "agents" runs: N/8 C++ TCPStore clients doing the per-rank runs' add / set / add /
# wait / get, a lower bound on torchrun's own rendezvous, close to its static one (--node-rank
# given) with the rank assignment after it; its default dynamic one compare-and-sets one state
# blob that grows with the agents and polls it once a second, the "c10d" runs), and then every
# worker opens its own store client for its process group (the per-rank TCPStore runs'
# connect), while ddp-trainer's workers open none (their store calls go over their node task's
# connection). The "as deployed" lines put them side by side: the rendezvous alone from the last
# node connected (torchrun's agents hand out ranks only), from the last node connected to every
# worker ready for its process group's store (torchrun's workers' own store connects included:
# issue 43's start-up phase), and the whole start-up from the first connect (our node tasks' TLS
# handshakes included). Each run spreads its
# connections over agent processes alike: one per 2,048 connections, at least 2 (a per-node run
# at 16,384 ranks has 2,048 connections in 2 processes, as the agents' run at 16,384 does).
#
# TCPStore runs with "::ffff:127.0.0.1 localhost" added to /etc/hosts inside a private mount
# namespace (unshare -m; needs root), so that its reverse lookups of the loopback address never
# leave the host; without root it runs as is, and the table says so.
# Needs a build ($BUILD_DIR, default build; or DDP_BIN_DIR) and, for the Python baseline, a Python
# with torch ($DDP_TORCH_PYTHON, or the venv of scripts/setup-deps.sh).
# A run this host cannot hold (descriptors, ephemeral ports, thread ids: ddp-scalebench exits 3) is
# listed under "not run on this host:" with its reason, and does not fail the script; any other
# failed run does (exit 1).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${DDP_BIN_DIR:-$root/${BUILD_DIR:-build}/bin}"   # BUILD_DIR: relative to the source root
for b in ddp-scalebench ddp-rankgen ddp-coordinator; do
  [[ -x "$bin/$b" ]] || { echo "loadgen.sh: build $b first (cmake --build build --target $b)" >&2; exit 1; }
done

quick=0; python=1; resolver=0; python_max=4096; plaintext=0; tcpstore=1; node=1; sizes=()
c10d_max=1024
reform=(); node_shard=()
while [[ $# -gt 0 ]]; do
  a="$1"; shift
  case "$a" in
    --quick) quick=1; python=0 ;;
    --no-python) python=0 ;;
    --python-max) python_max="$1"; shift ;;
    --c10d-max) c10d_max="$1"; shift ;;
    --resolver) resolver=1 ;;
    --plaintext) plaintext=1 ;;
    --no-tcpstore) tcpstore=0; python=0 ;;
    --no-node-calls) node=0 ;;
    --reform-all-shards) reform=(--reform-all-shards) ;;
    --node-shard-call) node_shard=(--separate-shard-call) ;;
    -h|--help) sed -n '2,62p' "$0"; exit 0 ;;
    *) sizes+=("$a") ;;
  esac
done
if [[ ${#sizes[@]} -eq 0 ]]; then
  if [[ $quick == 1 ]]; then sizes=(1024); else sizes=(1024 4096 16384); fi
fi
window=10; warmup=3
[[ $quick == 1 ]] && { window=3; warmup=2; }

py=""
if [[ $python == 1 ]]; then
  py="${DDP_TORCH_PYTHON:-$("$root/scripts/setup-deps.sh" --print-venv 2>/dev/null)/bin/python}"
  "$py" -c "import torch.distributed" 2>/dev/null || { echo "loadgen.sh: no torch in '$py'; skipping the Python baseline" >&2; py=""; }
fi
have_cpp=0; [[ $tcpstore == 1 && -x "$bin/ddp-tcpstore-bench" ]] && have_cpp=1
[[ $quick == 1 || $tcpstore == 0 || $node == 0 ]] && c10d_max=0
c10d_py=""
if ((c10d_max > 0)); then
  c10d_py="${DDP_TORCH_PYTHON:-$("$root/scripts/setup-deps.sh" --print-venv 2>/dev/null)/bin/python}"
  "$c10d_py" -c "import torch.distributed.elastic.rendezvous.dynamic_rendezvous" 2>/dev/null ||
    { echo "loadgen.sh: no torch in '$c10d_py'; skipping torchrun's dynamic rendezvous" >&2; c10d_py=""; }
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/ddp-loadgen.XXXXXX")"
trap 'rm -rf "$work"' EXIT
hosts="$work/hosts"
{ cat /etc/hosts; echo "::ffff:127.0.0.1 localhost"; } >"$hosts"
nodns_ok=0
if [[ $(id -u) == 0 ]] && unshare -m sh -c 'mount --bind "$0" /etc/hosts' "$hosts" 2>/dev/null; then
  nodns_ok=1
fi
# Runs "$@" with the loopback's IPv4-mapped address in /etc/hosts, in a private mount namespace
# (nothing outside this command sees it).
nodns() { unshare -m sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$hosts" "$@"; }

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }
col() { local v; v="$(field "$1" "$2")"; echo "${v:--}"; }   # "-" when the run never got there
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.1fx", a / b }'; }

# run LABEL [env...] -- scalebench args: prints one row; result line in $out.
out=""
failures=()
not_run=()
declare -A res
run() {
  local key="$1"; shift
  local log="$work/$key.log" rc=0
  "$@" >"$work/$key.out" 2>"$log" || rc=$?
  out="$(cat "$work/$key.out")"
  if [[ $rc == 3 ]]; then   # ddp-scalebench: this host cannot hold the run
    echo "loadgen.sh: $key not run: $(tail -1 "$log")" >&2
    not_run+=("$key: $(sed -n 's/^ddp-scalebench: not run on this host: //p' "$log" | tail -1)")
  elif [[ $rc != 0 || -z "$out" ]]; then
    echo "loadgen.sh: $key failed (exit $rc): $(tail -1 "$log")" >&2
    failures+=("$key")
  fi
  res[$key]="$out"
}

# A per-rank run's coordinator holds a descriptor per connection, and for a while more: a client
# whose TLS handshake ran past its deadline connects again while the server still holds the
# socket it gave up on. At 16,384 ranks per rank (18,432 connections with the node heartbeats) a
# hard limit of 20,000 ran out ("Failed accept4: Too many open files"). Where the benchmark may
# (root: CAP_SYS_RESOURCE, up to fs.nr_open), it raises the hard limit for itself and its
# children; the line below says what was in force.
fd_hard_was=$(ulimit -Hn)
fd_want=262144
if [[ $fd_hard_was != unlimited ]] && ((fd_hard_was < fd_want)); then
  nr_open=$(cat /proc/sys/fs/nr_open 2>/dev/null || echo "$fd_want")
  ((nr_open < fd_want)) && fd_want=$nr_open
  ulimit -n "$fd_want" 2>/dev/null || true
fi
echo "== host: $(nproc) cpus ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), $(uname -r); fd limit (hard) $(ulimit -Hn)$([[ $(ulimit -Hn) != "$fd_hard_was" ]] && echo " (raised from $fd_hard_was)"); ephemeral ports $(cat /proc/sys/net/ipv4/ip_local_port_range | tr '\t' '-'); somaxconn $(cat /proc/sys/net/core/somaxconn); tcp_max_syn_backlog $(cat /proc/sys/net/ipv4/tcp_max_syn_backlog)"
echo "== load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ $nodns_ok == 1 ]]; then
  tcp_note="TCPStore with ::ffff:127.0.0.1 in /etc/hosts (no reverse-DNS stalls)"
else
  tcp_note="TCPStore AS IS (not root: no private /etc/hosts; its connect includes this host's reverse DNS)"
fi
echo "== $tcp_note"
sb=("$bin/ddp-scalebench" --window "$window" --warmup "$warmup")
for n in "${sizes[@]}"; do
  # The rank lost in the re-formation: on a node in the middle, not its first local rank.
  lost=$(( n / 2 + 3 < n ? n / 2 + 3 : n - 1 ))
  run "grpc-$n" "${sb[@]}" --target grpc --ranks "$n" --lost-rank "$lost" "${reform[@]}"
  [[ $node == 1 ]] && run "node-$n" "${sb[@]}" --target grpc --ranks "$n" --lost-rank "$lost" "${reform[@]}" --node-calls "${node_shard[@]}"
  [[ $plaintext == 1 ]] && run "plain-$n" "${sb[@]}" --target grpc --ranks "$n" --plaintext --lost-rank "$lost" "${reform[@]}"
  if [[ $have_cpp == 1 ]]; then
    if [[ $nodns_ok == 1 ]]; then run "cpp-$n" nodns "${sb[@]}" --target tcpstore --ranks "$n"
    else run "cpp-$n" "${sb[@]}" --target tcpstore --ranks "$n"; fi
    # torchrun's agents: one store client per 8-rank node.
    if [[ $node == 1 && $((n / 8)) -ge 1 ]]; then
      if [[ $nodns_ok == 1 ]]; then run "agents-$n" nodns "${sb[@]}" --target tcpstore --ranks "$((n / 8))"
      else run "agents-$n" "${sb[@]}" --target tcpstore --ranks "$((n / 8))"; fi
    fi
  fi
  # torchrun's default dynamic rendezvous, its own code, one handler per 8-rank node.
  if [[ -n "$c10d_py" && $n -le $c10d_max && $((n / 8)) -ge 1 ]]; then
    c10d_cmd=("$c10d_py" "$root/bench/loadgen/torchrun_c10d_rendezvous.py" "$((n / 8))")
    if [[ $nodns_ok == 1 ]]; then run "c10d-$n" nodns "${c10d_cmd[@]}"; else run "c10d-$n" "${c10d_cmd[@]}"; fi
  fi
  if [[ -n "$py" && $n -le $python_max ]]; then
    pyargs=(--target tcpstore-py --python "$py" --tcpstore-py "$root/bench/loadgen/tcpstore_rendezvous.py" --ranks "$n")
    if [[ $nodns_ok == 1 ]]; then run "py-$n" nodns "${sb[@]}" "${pyargs[@]}"
    else run "py-$n" "${sb[@]}" "${pyargs[@]}"; fi
  fi
done
if [[ $resolver == 1 && $have_cpp == 1 ]]; then
  run "cppdns-${sizes[0]}" "${sb[@]}" --target tcpstore --ranks "${sizes[0]}" --phase-timeout 600
fi
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

echo
echo "Connect and rendezvous (seconds from the driver's command to the last rank done; one connection per rank, or per 8-rank node task in the per-node rows, or per torchrun agent (the ranks column counts agents there); CPU seconds of the server and of all client processes during the rendezvous, and the host's idle and stolen CPU seconds meanwhile; the server's peak resident set over the whole run)"
printf "%-7s %-34s %-6s %-10s %-12s %-13s %-12s %-12s %-10s %-11s %-12s %-14s %-9s\n" ranks server procs connect_s rendezvous_s rdzv_p99_ms rdzv_srv_cpu rdzv_cli_cpu rdzv_idle rdzv_steal srv_peak_mib listen_overfl load1
for key in $(for n in "${sizes[@]}"; do echo "grpc-$n node-$n plain-$n cpp-$n agents-$n py-$n"; done) "cppdns-${sizes[0]}"; do
  r="${res[$key]:-}"
  [[ -z "$r" ]] && continue
  case "$key" in
    grpc-*) name="ddp-coordinator (gRPC, TLS)" ;;
    node-*) name="ddp-coordinator (TLS, per node)" ;;
    plain-*) name="ddp-coordinator (plaintext)" ;;
    cpp-*) name="TCPStore, C++ client" ;;
    agents-*) name="TCPStore, torchrun agents" ;;
    py-*) name="TCPStore, Python client" ;;
    cppdns-*) name="TCPStore, C++, resolver as is" ;;
  esac
  printf "%-7s %-34s %-6s %-10s %-12s %-13s %-12s %-12s %-10s %-11s %-12s %-14s %-9s\n" "$(col ranks "$r")" "$name" "$(col procs "$r")" \
    "$(col connect_s "$r")" "$(col rendezvous_s "$r")" "$(col rendezvous_rank_p99_ms "$r")" \
    "$(col rendezvous_server_cpu_s "$r")" "$(col rendezvous_clients_cpu_s "$r")" \
    "$(col rendezvous_host_idle_s "$r")" "$(col rendezvous_host_steal_s "$r")" "$(col server_peak_rss_mib "$r")" \
    "$(col connect_ListenOverflows "$r")" "$(col load1_before "$r")"
done

echo
echo "ddp-coordinator under heartbeats (every rank at the coordinator's interval, 8 ranks per NodeHeartbeat; GetStatus from an operator process)"
printf "%-12s %-9s %-9s %-10s %-10s %-11s %-10s %-13s %-14s %-7s\n" ranks hb_per_s hb_failed hb_late hb_p99_ms st_p50_ms st_p99_ms coord_cores %core/1k_hb/s state
for key in $(for n in "${sizes[@]}"; do echo "grpc-$n node-$n plain-$n"; done); do
  r="${res[$key]:-}"
  [[ -z "$r" ]] && continue
  n="${key#*-}"; [[ $key == plain-* ]] && n="$n/plain"; [[ $key == node-* ]] && n="$n/node"
  printf "%-12s %-9s %-9s %-10s %-10s %-11s %-10s %-13s %-14s %-7s\n" "$n" "$(col hb_per_s "$r")" \
    "$(col hb_failed "$r")" "$(col hb_late "$r")" "$(col hb_p99_ms "$r")" \
    "$(col status_p50_ms "$r")" "$(col status_p99_ms "$r")" "$(col coord_cores "$r")" \
    "$(col coord_pct_core_per_1k_hbps "$r")" "$(col job_state "$r")"
done

echo
echo "Re-formation after one lost rank (in-job recovery with every rank heartbeating: one rank's node task reports it lost, its replacement (a new connection) registers, every other rank rejoins the next membership generation at once, as a failed collective tells ddp-trainer's workers, and the replacement fetches its shard (a survivor too when its rank or the world size changed, as ddp-trainer's workers do; every rank with --reform-all-shards); seconds from the driver's command, which the loss report follows, to the last rank holding its new rank and shard (the simulated calls' contexts and requests are made before the command, untimed); one connection and one call per rank, or per 8-rank node task in the /node rows)"
printf "%-12s %-14s %-14s %-13s %-13s %-11s %-10s %-10s %-9s\n" ranks re-formation_s rank_p50_ms rank_p99_ms srv_cpu_s generation hb_failed unhealthy state
for key in $(for n in "${sizes[@]}"; do echo "grpc-$n node-$n plain-$n"; done); do
  r="${res[$key]:-}"
  [[ -z "$r" ]] && continue
  n="${key#*-}"; [[ $key == plain-* ]] && n="$n/plain"; [[ $key == node-* ]] && n="$n/node"
  printf "%-12s %-14s %-14s %-13s %-13s %-11s %-10s %-10s %-9s\n" "$n" "$(col reformation_s "$r")" \
    "$(col reformation_rank_p50_ms "$r")" "$(col reformation_rank_p99_ms "$r")" \
    "$(col reformation_server_cpu_s "$r")" "$(col reformation_generation "$r")" \
    "$(col reformation_hb_failed "$r")" "$(col reformation_unhealthy_ranks "$r")" \
    "$(col reformation_job_state "$r")"
done

echo
echo "Ratios (TCPStore time / ddp-coordinator time for the same phase and size; above 1x = ours faster)"
for n in "${sizes[@]}"; do
  g="${res[grpc-$n]:-}"
  for side in cpp py; do
    t="${res[$side-$n]:-}"
    [[ -z "$g" || -z "$t" ]] && continue
    who="C++"; [[ $side == py ]] && who="Python"
    echo "  $n ranks, TCPStore $who client: connect $(ratio "$(field connect_s "$t")" "$(field connect_s "$g")"), rendezvous $(ratio "$(field rendezvous_s "$t")" "$(field rendezvous_s "$g")")"
  done
done
if [[ $node == 1 ]]; then
  echo
  echo "What carrying each node's calls in one call saves (one connection and one call per rank / per 8-rank node, TLS both, same run; above 1x = per node faster)"
  for n in "${sizes[@]}"; do
    g="${res[grpc-$n]:-}"; d="${res[node-$n]:-}"
    [[ -z "$g" || -z "$d" ]] && continue
    echo "  $n ranks: connect $(ratio "$(field connect_s "$g")" "$(field connect_s "$d")"), rendezvous $(ratio "$(field rendezvous_s "$g")" "$(field rendezvous_s "$d")"), re-formation $(ratio "$(field reformation_s "$g")" "$(field reformation_s "$d")"), coordinator CPU in the re-formation $(ratio "$(field reformation_server_cpu_s "$g")" "$(field reformation_server_cpu_s "$d")")"
  done
fi
if [[ $node == 1 && $have_cpp == 1 ]]; then
  echo
  echo "As deployed (torchrun: one agent per 8-rank node connects to TCPStore and rendezvouses, each worker then gets its rank from its agent and opens its own store client for its process group (the per-rank TCPStore connect); ddp-trainer: one node task per node connects (TLS) and carries its workers' Register and GetShard ($([[ ${#node_shard[@]} -gt 0 ]] && echo "a NodeRegister, then a NodeGetShard, as for a run that resumes" || echo "one NodeRegister whose Registers carry their first GetShard, as for a run that starts fresh")), and their process groups' store calls go over the same connection (the workers open none); above 1x = ours faster)"
  sum() { awk -v a="$1" -v b="$2" -v c="${3:-0}" 'BEGIN { if (a == "" || b == "") print ""; else printf "%.3f", a + b + c }'; }
  for n in "${sizes[@]}"; do
    a="${res[agents-$n]:-}"; d="${res[node-$n]:-}"; t="${res[cpp-$n]:-}"
    [[ -z "$a" || -z "$d" ]] && continue
    echo "  $n ranks ($((n / 8)) nodes): rendezvous from the last node connected: torchrun agents $(field rendezvous_s "$a") s, ours $(field rendezvous_s "$d") s: $(ratio "$(field rendezvous_s "$a")" "$(field rendezvous_s "$d")")"
    # Like for like: the agents' rendezvous hands out ranks only (DistributedSampler computes each
    # worker's shard locally); ours also hands out shards. Ours to every rank holding its rank:
    echo "  $n ranks ($((n / 8)) nodes): every rank holding its rank (no shard), from the last node connected: torchrun agents $(field rendezvous_s "$a") s, ours $(field rendezvous_ranked_s "$d") s: $(ratio "$(field rendezvous_s "$a")" "$(field rendezvous_ranked_s "$d")")"
    [[ -z "$t" ]] && continue
    # From the last node connected (the same event on both sides: the last agent / node task
    # connected) to every worker ready to build its process group: torchrun's workers get their
    # ranks from their agents' rendezvous and then open their own store clients; ours hold rank
    # and shard when the rendezvous ends and open none. Process starts are in neither.
    # The simulated clients share this host's cores with the server; the server's own CPU in the
    # phase is what no cluster spreads over its nodes, so it is printed beside the time.
    tl="$(sum "$(field rendezvous_s "$a")" "$(field connect_s "$t")")"
    tcpu="$(sum "$(field rendezvous_server_cpu_s "$a")" "$(field connect_server_cpu_s "$t")")"
    echo "  $n ranks: from the last node connected to every worker ready for its process group's store: torchrun $tl s (agents' rendezvous $(field rendezvous_s "$a") + workers' store clients $(field connect_s "$t")), ours $(field rendezvous_s "$d") s (the rendezvous; the workers open no connection): $(ratio "$tl" "$(field rendezvous_s "$d")"); the server's CPU in it: TCPStore $tcpu s, ddp-coordinator $(field rendezvous_server_cpu_s "$d") s"
    tr="$(sum "$(field connect_s "$a")" "$(field rendezvous_s "$a")" "$(field connect_s "$t")")"
    ou="$(sum "$(field connect_s "$d")" "$(field rendezvous_s "$d")")"
    echo "  $n ranks: from the first connect to every worker ready for its process group's store: torchrun $tr s (agents connect $(field connect_s "$a") + rendezvous $(field rendezvous_s "$a") + workers' store clients $(field connect_s "$t")), ours $ou s (node tasks connect $(field connect_s "$d") + rendezvous $(field rendezvous_s "$d")): $(ratio "$tr" "$ou")"
    c="${res[c10d-$n]:-}"
    [[ -z "$c" ]] && continue
    tc="$(sum "$(field connect_s "$a")" "$(field rendezvous_s "$c")" "$(field connect_s "$t")")"
    echo "  $n ranks, torchrun's default (dynamic, c10d) rendezvous instead: torchrun $tc s (agents connect $(field connect_s "$a") + its DynamicRendezvousHandler $(field rendezvous_s "$c") s, $(field cas "$c") compare-and-sets of which $(field cas_lost "$c") lost, $(field waits_1s "$c") one-second waits, agents' CPU $(field agents_cpu_s "$c") s + workers' store clients $(field connect_s "$t")), ours $ou s: $(ratio "$tc" "$ou")"
  done
fi
if [[ $plaintext == 1 ]]; then
  echo
  echo "What TLS costs (TLS / plaintext, same run; above 1x = TLS slower or costlier)"
  for n in "${sizes[@]}"; do
    g="${res[grpc-$n]:-}"; p="${res[plain-$n]:-}"
    [[ -z "$g" || -z "$p" ]] && continue
    echo "  $n ranks: connect $(ratio "$(field connect_s "$g")" "$(field connect_s "$p")"), rendezvous $(ratio "$(field rendezvous_s "$g")" "$(field rendezvous_s "$p")"), coordinator CPU in the rendezvous $(ratio "$(field rendezvous_server_cpu_s "$g")" "$(field rendezvous_server_cpu_s "$p")"), heartbeat p99 $(ratio "$(field hb_p99_ms "$g")" "$(field hb_p99_ms "$p")"), coordinator cores under heartbeats $(ratio "$(field coord_cores "$g")" "$(field coord_cores "$p")"), peak RSS $(ratio "$(field server_peak_rss_mib "$g")" "$(field server_peak_rss_mib "$p")")"
  done
fi
for key in "${failures[@]}"; do
  e="$(field error "${res[$key]:-}")"; j="$(field job_failure "${res[$key]:-}")"
  echo "$key FAILED: ${e:-see above}${j:+ (job: $j)}" | tr '_' ' '
done
for line in "${not_run[@]}"; do echo "not run on this host: $line"; done

# The status snapshot's rendering, full against incremental, at each size: the same statuses in
# memory, rebuilt every 0.2 s while each rank heartbeats at the interval the coordinator gives it.
if [[ -x "$bin/ddp-renderbench" ]]; then
  echo
  echo "Status snapshot rendering (ddp-renderbench: ms per build, full ToJson + ToProto + metrics / incremental StatusRender)"
  for n in "${sizes[@]}"; do
    r="$("$bin/ddp-renderbench" --ranks "$n" --builds 30 | grep '^ok ' || true)"
    [[ -z "$r" ]] && { echo "  $n ranks: ddp-renderbench failed"; failures+=("render-$n"); continue; }
    echo "  $n ranks (heartbeat $(field interval_s "$r") s): full $(field full_ms "$r") ms, incremental $(field incremental_ms "$r") ms, $(field ratio_full_over_incremental "$r")x"
  done
fi

echo
echo "== raw results (ddp-scalebench, one line per run)"
for key in $(for n in "${sizes[@]}"; do echo "grpc-$n node-$n plain-$n cpp-$n agents-$n c10d-$n py-$n"; done) "cppdns-${sizes[0]}"; do
  [[ -n "${res[$key]:-}" ]] && echo "$key: ${res[$key]}"
done
if [[ ${#failures[@]} -gt 0 ]]; then
  echo "loadgen.sh: FAILED: ${failures[*]} (heartbeats failed, the job failed, or a run did not finish)" >&2
  exit 1
fi
