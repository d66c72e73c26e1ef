#!/usr/bin/env bash
# slurm-cluster.sh — a throw-away, real 2-node Slurm cluster on one machine, for tests.
#
#   scripts/slurm-cluster.sh start <dir>          start munged + slurmctld + slurmd n1..nN in <dir>
#   scripts/slurm-cluster.sh env   <dir>          print `export ...` lines for the clients
#   scripts/slurm-cluster.sh stop  <dir>          cancel all jobs, stop every daemon, sweep <dir>
#   scripts/slurm-cluster.sh run   <dir> -- cmd…  start, run cmd with the env, stop; cmd's exit code
#   scripts/slurm-cluster.sh status <dir>         sinfo + squeue of a started cluster
#
# Everything lives under <dir> (created if missing; must be an absolute-able short path, because
# the munge socket path must stay under 108 bytes): munge key/socket/log, slurm.conf, gres.conf,
# controller state, slurmd spool dirs, pid files and logs. Ports are probed free at start (below
# the ephemeral range), so two clusters on one machine do not collide, and a start whose port was
# taken before its daemon bound it is retried on other ports. Nothing is installed or written
# outside <dir>.
#
# The cluster: ClusterName ddp-<random>, controller on localhost, nodes n1 and n2 (SLURM_HARNESS_NODES: more; all
# NodeHostname=localhost, distinct Port=, one `slurmd -N <node>` each), CPUs=2 each (over-
# committing a small machine is fine), a fake gres "gpu:2" on each node (/dev/null devices) so GPU-style
# sbatch lines (--gres=gpu:N, --gpus-per-node=N) are accepted, partition `debug` (default).
# proctrack/linuxproc + task/none (no cgroups needed), no accounting (sacct is not available).
# Requeue delay (AuthInfo cred_expire) is cut from 120 s to SLURM_HARNESS_CRED_EXPIRE (10 s).
#
# Environment knobs:
#   SLURM_HARNESS_NODES        nodes n1..nN                               (2)
#   SLURM_HARNESS_CPUS         CPUs per node                              (2)
#   SLURM_HARNESS_GPUS         fake gres gpu per node; 0 = no gres        (2)
#   SLURM_HARNESS_CRED_EXPIRE  seconds; also the wait before a requeued job may start (10)
#   SLURM_HARNESS_TIMEOUT      seconds to wait for both nodes idle        (60)
#   SLURM_HARNESS_PORTS        "CTLD N1 N2 ...": the ports of the first try (default: probed
#                              free below the ephemeral range); a port found taken at the
#                              daemon's bind is retried on probed ports, twice at most
#   SLURM_HARNESS_OWNER        pid; a watchdog stops the cluster when that process dies. `run`
#                              sets it to itself, so a test killed by CTest leaves nothing behind.
#
# Teardown (`stop`) never relies on names: it kills the pids recorded in <dir>/run/*.pid and then
# sweeps every process whose cwd or an open file lies under <dir> (slurmstepd keeps the slurmd log
# open; job processes run with --chdir under <dir> in our tests), and fails if anything survives.
set -uo pipefail

SELF="$(readlink -f "${BASH_SOURCE[0]}")"
REQUIRED_BINS=(munged munge slurmctld slurmd srun sbatch scontrol scancel squeue sinfo)

die() { echo "slurm-cluster: error: $*" >&2; exit 1; }
log() { echo "slurm-cluster: $*" >&2; }

check_bins() {
  local missing=() b
  for b in "${REQUIRED_BINS[@]}"; do
    command -v "$b" >/dev/null 2>&1 || [[ -x /usr/sbin/$b ]] || missing+=("$b")
  done
  if ((${#missing[@]})); then
    die "Slurm/munge binaries missing: ${missing[*]}. They are required for the Slurm tests;" \
        "install them with scripts/setup-deps.sh (Debian: apt-get install slurm-wlm munge)."
  fi
}

# A free TCP port on 127.0.0.1, not in the list already handed out by this call chain. It is
# drawn below the kernel's ephemeral range (ip_local_port_range), which the outgoing connections
# and port-0 listeners of everything else on the machine draw from: a port probed free there
# can be taken again before a daemon binds it (tests run side by side do that all the time).
PORTS_TAKEN=" "
free_port() {
  local p i lo=32768 hi
  read -r lo hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || lo=32768
  local first=10000 last=$((lo - 1))
  if ((last - first < 1000)); then first=$((hi + 1)); last=65000; fi   # an unusual range
  ((last - first >= 1000)) || { first=20000; last=60000; }
  for i in $(seq 1 200); do
    p=$((first + (RANDOM * 32768 + RANDOM) % (last - first + 1)))
    # Not in use on any address in any state, not taken by us already.
    if [[ "$PORTS_TAKEN" != *" $p "* ]] && [[ -z "$(ss -Htan "sport = :$p" 2>/dev/null)" ]]; then
      PORTS_TAKEN+="$p "
      echo "$p"
      return 0
    fi
  done
  die "no free TCP port found"
}

abs_dir() {  # create and canonicalize
  [[ -n "${1:-}" ]] || die "missing <dir>"
  mkdir -p "$1" || die "cannot create $1"
  readlink -f "$1"
}

sbin() { command -v "$1" 2>/dev/null || echo "/usr/sbin/$1"; }

env_lines() {  # the client environment for a cluster in $1
  local d=$1
  echo "export SLURM_CONF=$d/slurm.conf"
  echo "export SLURM_HARNESS_DIR=$d"
  # Client commands must not think they run inside some outer allocation.
  local v
  for v in $(compgen -e | grep -E '^(SLURM_|SBATCH_|SRUN_|SALLOC_)' | grep -vE '^(SLURM_CONF|SLURM_HARNESS_.*)$'); do
    echo "unset $v"
  done
  case ":$PATH:" in *":/usr/sbin:"*) ;; *) echo "export PATH=\$PATH:/usr/sbin" ;; esac
}

pid_alive() { [[ -n "${1:-}" ]] && kill -0 "$1" 2>/dev/null; }
pid_of() { [[ -s "$1" ]] && tr -dc '0-9' <"$1"; }

dump_logs() {
  local d=$1 f
  for f in "$d"/log/*; do
    [[ -f "$f" ]] || continue
    echo "----- $f (last 40 lines) -----" >&2
    tail -n 40 "$f" >&2
  done
}

# The node names n1..nN (SLURM_HARNESS_NODES, default 2).
node_names() {
  local i
  for ((i = 1; i <= ${SLURM_HARNESS_NODES:-2}; i++)); do echo "n$i"; done
}

write_config() {  # <dir> <slurmctld port> <port of n1> <port of n2> ...
  local d=$1 ctld_port=$2 p1=$3
  local -a ports=("${@:3}")
  local cpus=${SLURM_HARNESS_CPUS:-2} gpus=${SLURM_HARNESS_GPUS:-2}
  local cred=${SLURM_HARNESS_CRED_EXPIRE:-10}
  local gres_node="" gres_types=""
  if ((gpus > 0)); then
    gres_node="Gres=gpu:$gpus"
    gres_types="GresTypes=gpu"
    # Slurm 22.05 drops file-less GPUs, so each fake GPU is a symlink to /dev/null (a char
    # device); slurmd then sets CUDA_VISIBLE_DEVICES/SLURM_GPUS_ON_NODE like on a real node.
    local i
    mkdir -p "$d/dev"
    for ((i = 0; i < gpus; i++)); do ln -sfn /dev/null "$d/dev/nvidia$i"; done
    printf 'Name=gpu File=%s/dev/nvidia[0-%d]\n' "$d" $((gpus - 1)) >"$d/gres.conf"
  else
    : >"$d/gres.conf"
  fi
  : >"$d/plugstack.conf"   # do not pick up the host's /etc/slurm/plugstack.conf
  cat >"$d/slurm.conf" <<EOF
# Generated by scripts/slurm-cluster.sh for a test cluster; do not edit.
ClusterName=ddp-$(printf '%04x%04x' $RANDOM $RANDOM)
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
SlurmdPort=$p1
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$d/munge.sock,cred_expire=$cred
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool/%n
SlurmctldPidFile=$d/run/slurmctld.pid
SlurmdPidFile=$d/run/slurmd.%n.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$d/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=1
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SlurmdParameters=config_overrides
ReturnToService=2
JobRequeue=1
KillWait=5
UnkillableStepTimeout=30
InactiveLimit=0
MinJobAge=600
MessageTimeout=10
SlurmdTimeout=60
SlurmctldTimeout=60
TmpFS=$d/tmp
$gres_types
EOF
  local i names=()
  for ((i = 0; i < ${#ports[@]}; i++)); do
    echo "NodeName=n$((i + 1)) NodeHostname=localhost NodeAddr=127.0.0.1 Port=${ports[i]} CPUs=$cpus $gres_node State=UNKNOWN" >>"$d/slurm.conf"
    names+=("n$((i + 1))")
  done
  local IFS=,
  echo "PartitionName=debug Nodes=${names[*]} Default=YES MaxTime=INFINITE State=UP" >>"$d/slurm.conf"
}

start_watchdog() {  # stop the cluster when the owner process disappears
  local d=$1 owner=$2
  # Own session, so a kill of the owner's whole process group (CTest timeout) does not take
  # the watchdog down with it.
  setsid bash "$SELF" _watchdog "$d" "$owner" </dev/null >>"$d/log/watchdog.log" 2>&1 &
  echo $! >"$d/run/watchdog.pid"
}

cmd_watchdog() {
  local d=$1 owner=$2
  trap '' HUP INT
  while kill -0 "$owner" 2>/dev/null && [[ -e "$d/run/watchdog.pid" ]]; do sleep 1; done
  if [[ -e "$d/run/watchdog.pid" ]]; then
    echo "$(date +%T) owner $owner gone; stopping cluster"
    cmd_stop "$d"
  fi
}

cmd_start() {
  check_bins
  local d; d=$(abs_dir "$1")
  local sock="$d/munge.sock"
  ((${#sock} < 100)) || die "<dir> path too long for a unix socket: $d (use a short path like /tmp/slurm.XXXX)"
  [[ ! -e "$d/run/slurmctld.pid" ]] || die "$d seems to hold a started cluster; stop it first"
  chmod 0755 "$d"   # munged wants o+x on the socket's directory
  mkdir -p "$d"/{state,run,log,tmp,munge} || die "mkdir in $d"
  local n
  for n in $(node_names); do mkdir -p "$d/spool/$n" || die "mkdir in $d"; done
  chmod 0700 "$d/munge" "$d/state"

  # MUNGE: own key, socket, pid, log and seed files.
  dd if=/dev/urandom of="$d/munge/munge.key" bs=1024 count=1 status=none || die "munge key"
  chmod 0400 "$d/munge/munge.key"
  local munged; munged=$(sbin munged)
  setsid "$munged" --foreground --force --socket="$sock" --key-file="$d/munge/munge.key" \
    --pid-file="$d/run/munged.pid.self" --log-file="$d/log/munged.log" \
    --seed-file="$d/munge/munged.seed" --num-threads=2 </dev/null >>"$d/log/munged.out" 2>&1 &
  echo $! >"$d/run/munged.pid"
  local i
  for i in $(seq 1 100); do
    [[ -S "$sock" ]] && munge -n -S "$sock" 2>/dev/null | unmunge -S "$sock" >/dev/null 2>&1 && break
    pid_alive "$(pid_of "$d/run/munged.pid")" || { dump_logs "$d"; cmd_stop "$d"; die "munged exited"; }
    sleep 0.1
  done
  [[ -S "$sock" ]] || { dump_logs "$d"; cmd_stop "$d"; die "munged socket never appeared"; }

  # A daemon that finds its port taken after all (another program bound it between the probe
  # and the daemon's bind) exits at once: that start is retried on fresh ports.
  local attempt rc
  for attempt in 1 2 3; do
    start_daemons "$d" "$attempt"; rc=$?
    ((rc == 0)) && return 0
    ((rc == 2 && attempt < 3)) || break
    log "a daemon's port was taken before it could bind it (attempt $attempt); retrying on other ports"
    stop_daemons "$d"
    local f
    for f in "$d"/log/slurm*.log "$d"/log/slurm*.out; do [[ -f "$f" ]] && mv -f "$f" "$f.attempt$attempt"; done
    rm -rf "${d:?}"/state/* "${d:?}"/spool/*/*
  done
  dump_logs "$d"
  cmd_stop "$d"
  die "cluster failed to start"
}

# Kills slurmctld and the slurmds of a cluster whose start failed (nothing runs on it yet).
stop_daemons() {
  local d=$1 f pids=()
  for f in "$d"/run/slurmd.*.pid.bg "$d"/run/slurmctld.pid.bg; do
    [[ -e "$f" ]] && pids+=("$(pid_of "$f")")
  done
  # SIGKILL: no job ever ran there, and a slurmd whose controller is gone takes seconds to end.
  kill_and_wait KILL 5 "${pids[@]}"
  rm -f "$d"/run/slurmd.*.pid* "$d"/run/slurmctld.pid*
}

# Writes the config on fresh ports, starts slurmctld and the slurmds, and waits until every node
# is idle. 0: up; 2: a daemon exited because its port was in use (worth another try); 1: any
# other failure. Leaves the daemons running either way (the caller stops them).
start_daemons() {
  local d=$1 attempt=$2 n
  local ctld_port ports=() port_list="" wanted=()
  # shellcheck disable=SC2206
  ((attempt == 1)) && wanted=(${SLURM_HARNESS_PORTS:-})
  if ((${#wanted[@]})); then
    ((${#wanted[@]} == 1 + $(node_names | wc -l))) ||
      { log "SLURM_HARNESS_PORTS needs $((1 + $(node_names | wc -l))) ports (slurmctld, then each node), got '${wanted[*]}'"; return 1; }
    ctld_port=${wanted[0]}
  else
    ctld_port=$(free_port)
  fi
  local i=1
  for n in $(node_names); do
    if ((${#wanted[@]})); then ports+=("${wanted[i]}"); else ports+=("$(free_port)"); fi
    port_list+=" $n=${ports[-1]}"
    i=$((i + 1))
  done
  write_config "$d" "$ctld_port" "${ports[@]}"
  echo "ports: slurmctld=$ctld_port$port_list" >"$d/ports"

  # Daemons in the foreground (-D), backgrounded here, so their pids are ours to track; each in
  # its own session (setsid), so that a signal to the caller's process group does not kill
  # them half-way (the watchdog or `stop` tears them down in order).
  # SLURM_CONF too, not just -f: slurmd looks for gres.conf beside $SLURM_CONF.
  export SLURM_CONF="$d/slurm.conf"
  # -i: ignore any state from a previous run (there is none: fresh StateSaveLocation).
  setsid "$(sbin slurmctld)" -D -i -f "$d/slurm.conf" </dev/null >>"$d/log/slurmctld.out" 2>&1 &
  echo $! >"$d/run/slurmctld.pid.bg"
  disown   # tracked by pid file; no "Killed" notice from this shell when a failed start is cleared
  for n in $(node_names); do
    setsid "$(sbin slurmd)" -D -N "$n" -f "$d/slurm.conf" </dev/null >>"$d/log/slurmd.$n.out" 2>&1 &
    echo $! >"$d/run/slurmd.$n.pid.bg"
    disown
  done
  if [[ -n "${SLURM_HARNESS_OWNER:-}" && ! -e "$d/run/watchdog.pid" ]]; then
    start_watchdog "$d" "$SLURM_HARNESS_OWNER"
  fi

  # Wait until both nodes are idle.
  local deadline=$((SECONDS + ${SLURM_HARNESS_TIMEOUT:-60})) states=""
  while ((SECONDS < deadline)); do
    local f
    for f in "$d"/run/*.pid.bg; do
      if ! pid_alive "$(pid_of "$f")"; then
        log "daemon from $f exited early"
        grep -qs "Address already in use" "$d"/log/slurm*.log "$d"/log/slurm*.out && return 2
        return 1
      fi
    done
    # sinfo waits MessageTimeout (10 s) for a controller that is not there: a daemon that dies
    # during the call is seen at the next turn, within 3 s.
    states=$(SLURM_CONF="$d/slurm.conf" timeout 3 sinfo -h -N -o '%N %t' 2>/dev/null | sort -u | tr '\n' ' ')
    local all_idle=1
    for n in $(node_names); do [[ "$states" == *"$n idle"* ]] || all_idle=0; done
    if ((all_idle)); then
      log "cluster up in $d ($(cat "$d/ports")); nodes: $states"
      return 0
    fi
    if [[ "$states" == *inval* || "$states" == *drain* || "$states" == *drng* ]]; then
      log "a node registered as invalid/drained (sinfo: $states)"
      return 1
    fi
    sleep 0.5
  done
  log "nodes not idle (waited ${SLURM_HARNESS_TIMEOUT:-60}s; sinfo: ${states:-none})"
  SLURM_CONF="$d/slurm.conf" scontrol show nodes >&2 2>&1 || true
  return 1
}

ppid_of() {  # parent pid from /proc (no fork)
  local st
  { st=$(<"/proc/$1/stat"); } 2>/dev/null || return 1
  st=${st##*) }
  set -- $st
  echo "$2"
}

# Pids of processes whose cwd or an open fd is under $1, except this script's process ($$),
# its ancestors and its descendants (the scan's own helpers inherit our stderr, which is a log
# under $1 in the watchdog).
procs_under() {
  local d=$1 exclude=" " p q
  p=$$
  while [[ -n "$p" && "$p" -gt 1 ]]; do exclude+="$p "; p=$(ppid_of "$p") || break; done
  find /proc/[0-9]*/cwd /proc/[0-9]*/fd -maxdepth 1 \( -lname "$d" -o -lname "$d/*" \) -print 2>/dev/null |
    cut -d/ -f3 | sort -un | while read -r p; do
      [[ "$exclude" == *" $p "* ]] && continue
      q=$p
      while [[ -n "$q" && "$q" -gt 1 && "$q" != "$$" ]]; do q=$(ppid_of "$q") || break; done
      [[ "$q" == "$$" ]] && continue   # one of ours
      [[ -e /proc/$p ]] && echo "$p"
    done
}

kill_and_wait() {  # kill_and_wait SIG timeout pid...
  local sig=$1 t=$2; shift 2
  local pids=("$@") p alive deadline=$((SECONDS + t))
  ((${#pids[@]})) || return 0
  kill "-$sig" "${pids[@]}" 2>/dev/null
  while ((SECONDS < deadline)); do
    alive=0
    for p in "${pids[@]}"; do pid_alive "$p" && alive=1; done
    ((alive)) || return 0
    sleep 0.2
  done
  return 1
}

cmd_stop() {
  local d; d=$(readlink -f "$1") || die "no such dir $1"
  [[ -d "$d" ]] || die "no such dir $1"
  local wd; wd=$(pid_of "$d/run/watchdog.pid")
  rm -f "$d/run/watchdog.pid"   # tells a watchdog to exit quietly
  [[ -n "$wd" && "$wd" != "$$" ]] && kill "$wd" 2>/dev/null
  local conf="$d/slurm.conf" ctld
  ctld=$(pid_of "$d/run/slurmctld.pid.bg")
  if [[ -f "$conf" ]] && pid_alive "$ctld"; then
    # Cancel everything and give the steps a moment to end the normal way.
    SLURM_CONF="$conf" timeout 15 scancel --full --quiet --partition=debug 2>/dev/null
    SLURM_CONF="$conf" timeout 15 scancel --quiet --partition=debug 2>/dev/null
    local deadline=$((SECONDS + 20))
    while ((SECONDS < deadline)); do
      [[ -z "$(SLURM_CONF="$conf" timeout 5 squeue -h -t all -o %i 2>/dev/null |
               xargs -r -I{} sh -c "SLURM_CONF=$conf scontrol show job {} -o 2>/dev/null" |
               grep -E 'JobState=(RUNNING|COMPLETING|CONFIGURING|SUSPENDED|REQUEUED|PENDING)')" ]] && break
      sleep 0.5
    done
  fi
  local f pids=()
  for f in "$d"/run/slurmd.*.pid.bg "$d"/run/slurmctld.pid.bg; do
    [[ -e "$f" ]] && pids+=("$(pid_of "$f")")
  done
  kill_and_wait TERM 15 "${pids[@]}" || kill_and_wait KILL 5 "${pids[@]}"
  # Leftovers: slurmstepd and job processes (they hold files under $d open or run in it).
  local left
  left=$(procs_under "$d" | grep -vxF "$(pid_of "$d/run/munged.pid")" | tr '\n' ' ')
  if [[ -n "${left// }" ]]; then
    # shellcheck disable=SC2086
    kill_and_wait TERM 5 $left || kill_and_wait KILL 5 $left
  fi
  [[ -e "$d/run/munged.pid" ]] && { kill_and_wait TERM 10 "$(pid_of "$d/run/munged.pid")" || kill_and_wait KILL 5 "$(pid_of "$d/run/munged.pid")"; }
  # Verify.
  local survivors=""
  for f in "$d"/run/*.pid "$d"/run/*.pid.bg; do
    [[ -e "$f" ]] || continue
    pid_alive "$(pid_of "$f")" && survivors+="$(pid_of "$f")($(basename "$f")) "
  done
  left=$(procs_under "$d" | tr '\n' ' ')
  [[ -n "${left// }" ]] && survivors+="$left"
  rm -f "$d"/run/*.pid "$d"/run/*.pid.bg "$d"/run/*.pid.self
  if [[ -n "${survivors// }" ]]; then
    log "processes survived stop: $survivors"
    local p; for p in $survivors; do ps -o pid,ppid,args -p "${p%%(*}" >&2 2>/dev/null; done
    return 1
  fi
  log "cluster in $d stopped; no process left"
  return 0
}

cmd_run() {
  local d=$1; shift
  [[ "${1:-}" == "--" ]] && shift
  (($#)) || die "run: no command"
  d=$(abs_dir "$d")
  export SLURM_HARNESS_OWNER=$$
  local rc
  trap 'cmd_stop "$d" >/dev/null 2>&1 || true' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  cmd_start "$d" || exit 1
  eval "$(env_lines "$d")"
  "$@"; rc=$?
  trap - EXIT
  cmd_stop "$d" || { ((rc)) || rc=1; log "stop failed"; }
  return $rc
}

case "${1:-}" in
  start) shift; [[ $# -eq 1 ]] || die "usage: start <dir>"; cmd_start "$1" ;;
  stop)  shift; [[ $# -eq 1 ]] || die "usage: stop <dir>"; cmd_stop "$1" ;;
  env)   shift; [[ $# -eq 1 ]] || die "usage: env <dir>"; env_lines "$(readlink -f "$1")" ;;
  status) shift; SLURM_CONF="$(readlink -f "$1")/slurm.conf" sinfo -N; SLURM_CONF="$(readlink -f "$1")/slurm.conf" squeue ;;
  run)   shift; [[ $# -ge 2 ]] || die "usage: run <dir> -- cmd..."; d=$1; shift; cmd_run "$d" "$@"; exit $? ;;
  check) check_bins; echo "ok" ;;
  _watchdog) shift; cmd_watchdog "$1" "$2" ;;
  *) sed -n '2,9p' "$SELF" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
