# shellcheck shell=bash
# tests/integration/slurm/lib.sh — helpers for the Slurm integration tests (sourced).
# Each test script calls `slurm_test_main "$@"`: it creates a short temp dir, starts the
# 2-node cluster with scripts/slurm-cluster.sh (which stops it again on any exit, including a
# CTest timeout kill of the test), runs the function `body` inside it, and reports the time.
set -uo pipefail

T_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
T_HARNESS=$T_REPO/scripts/slurm-cluster.sh
T_NAME=$(basename "${0%.sh}")

fail() { echo "FAIL [$T_NAME]: $*" >&2; exit 1; }
# The shared shell library: ddp_find_bin, DDP_EXIT_* (through ddpctl), ddp_dist_field, ...
# shellcheck source=../../../slurm/lib/ddp.sh
source "$T_REPO/slurm/lib/ddp.sh"
ddp_load_exit_codes || fail "cannot read the exit codes (build ddpctl first, or set DDP_BIN_DIR)"
T_START=${T_START:-$(date +%s)}
t_elapsed() { echo $(($(date +%s) - T_START)); }
note() { echo "[$T_NAME +$(t_elapsed)s] $*"; }

# wait_until TIMEOUT DESCRIPTION CMD...: poll CMD every 0.5 s until it succeeds.
wait_until() {
  local t=$1 what=$2; shift 2
  local deadline=$((SECONDS + t))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { note "timed out after ${t}s waiting for: $what"; return 1; }
    sleep 0.5
  done
}

# wait_eval TIMEOUT DESCRIPTION 'SHELL CODE': like wait_until, but the code (which may use
# command substitutions and functions) is evaluated afresh on every poll.
wait_eval() {
  local t=$1 what=$2 code=$3
  local deadline=$((SECONDS + t))
  until eval "$code" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { note "timed out after ${t}s waiting for: $what"; return 1; }
    sleep 0.5
  done
}

job_field() {  # job_field JOBID FIELD -> value of FIELD= in scontrol show job
  scontrol show job "$1" -o 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1
}
job_state_is() { [[ "$(job_field "$1" JobState)" == "$2" ]]; }
job_done() {  # terminal state
  case "$(job_field "$1" JobState)" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED) return 0 ;; esac
  return 1
}
show_job() { scontrol show job "$1" 2>&1 | sed 's/^/    /'; }

# Processes whose cwd is under $1 (a job's working dir): what "no process left behind" checks.
procs_in() {
  local d=$1 p
  for p in /proc/[0-9]*; do
    case "$(readlink "$p/cwd" 2>/dev/null)" in "$d"|"$d"/*) [[ ${p#/proc/} != "$$" ]] && echo "${p#/proc/}" ;; esac
  done
}

slurm_test_main() {
  local rc
  if [[ "${1:-}" == "--inside-cluster" ]]; then   # second stage: the cluster is up, env is set
    cd "$T_WORK" || exit 1
    body; rc=$?
    ((rc == DDP_EXIT_OK)) && note "body passed" || note "body FAILED (exit $rc)"
    exit $rc
  fi
  local why
  why=$("$T_HARNESS" check 2>&1) || fail "Slurm is required for the 'slurm' tests: ${why#slurm-cluster: error: }"
  T_DIR=$(mktemp -d /tmp/slt.XXXXXX) || fail "mktemp"
  export T_DIR T_WORK=$T_DIR/work T_START
  mkdir -p "$T_WORK"
  # `run` starts the cluster, exports SLURM_CONF (and strips outer SLURM_* vars), runs us again,
  # stops the cluster (also if we are killed: its watchdog follows this process) and fails if
  # any process survived.
  "$T_HARNESS" run "$T_DIR" -- bash "$0" --inside-cluster
  rc=$?
  note "total wall time $(t_elapsed)s (cluster start+stop included), exit $rc"
  if ((rc == DDP_EXIT_OK)) && [[ -z "${SLURM_TEST_KEEP:-}" ]]; then rm -rf "$T_DIR"; else echo "cluster folder kept for inspection: $T_DIR" >&2; fi
  exit $rc
}
