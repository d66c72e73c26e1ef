# shellcheck shell=bash
# slurm/lib/ddp.sh — the one shell library of the Slurm kit, the test scripts and the benchmarks
# (sourced, bash only). Everything a script needs from slurm-ddp goes through here:
#
#   ddp_find_bin NAME         path of a slurm-ddp binary; the one lookup order:
#                             $DDP_BIN_DIR, then PATH, then <repo>/build/bin (this kit's repo),
#                             then $SLURM_SUBMIT_DIR/build/bin
#   ddp_load_exit_codes       defines DDP_EXIT_OK, DDP_EXIT_RESUMABLE, ... from
#                             `ddpctl exit-codes` (common/exit_codes.h); no script writes an exit
#                             code as a number
#   ddp_dist_field FILE NAME  one field of a dist_file (job_id, generation, nonce, grpc_address,
#                             http_port, token) through `ddpctl dist-file`; no script parses it
#   ddp_torch_python          the Python whose torch LibTorch came from: $DDP_TORCH_PYTHON, else
#                             the project venv (scripts/setup-deps.sh --print-venv)
#   ddp_job_outcome DIST_FILE how the job of DIST_FILE ended (SUCCEEDED, STOPPED, FAILED or
#                             UNKNOWN), from the result file its coordinator writes at the end;
#                             never from a log line
#   ddp_log MESSAGE...        a stamped line on stderr
#
# Sourcing it twice is harmless. It sets no shell options of its own.

[[ -n "${DDP_LIB_LOADED:-}" ]] && return 0
DDP_LIB_LOADED=1
DDP_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DDP_REPO_DIR=$(cd "$DDP_LIB_DIR/../.." && pwd)

ddp_log() { echo "[ddp-kit $(date +%H:%M:%S) job ${SLURM_JOB_ID:-?} gen ${SLURM_RESTART_COUNT:-0}] $*" >&2; }

ddp_find_bin() {
  local name=$1 dir
  if [[ -n "${DDP_BIN_DIR:-}" ]]; then
    [[ -x "$DDP_BIN_DIR/$name" ]] && { echo "$DDP_BIN_DIR/$name"; return 0; }
  fi
  if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return 0; fi
  for dir in "$DDP_REPO_DIR/build/bin" "${SLURM_SUBMIT_DIR:-}/build/bin"; do
    [[ -x "$dir/$name" ]] && { echo "$dir/$name"; return 0; }
  done
  ddp_log "error: cannot find $name (set DDP_BIN_DIR, put it on PATH, or run 'make build' in $DDP_REPO_DIR)"
  return 1
}

ddp_load_exit_codes() {
  local ctl codes
  ctl=$(ddp_find_bin ddpctl) || return 1
  codes=$("$ctl" exit-codes) || { ddp_log "error: $ctl exit-codes failed"; return 1; }
  [[ "$codes" == *DDP_EXIT_RESUMABLE=* ]] || { ddp_log "error: $ctl exit-codes printed no DDP_EXIT_RESUMABLE"; return 1; }
  eval "$codes"
}

ddp_dist_field() {
  local ctl
  ctl=$(ddp_find_bin ddpctl) || return 1
  "$ctl" --dist-file "$1" dist-file --field "$2"
}

ddp_torch_python() {
  if [[ -n "${DDP_TORCH_PYTHON:-}" ]]; then echo "$DDP_TORCH_PYTHON"; return 0; fi
  local venv
  venv=$("$DDP_REPO_DIR/scripts/setup-deps.sh" --print-venv) || return 1
  echo "$venv/bin/python"
}

# ddp_job_outcome DIST_FILE: prints how the job of DIST_FILE ended, from <DIST_FILE>.result, which
# its coordinator writes (atomically, mode 0600) after the job has ended: SUCCEEDED, STOPPED or
# FAILED; UNKNOWN (and returns 1) when there is no such file (the coordinator did not finish), or
# it is not a regular file of this user, or others may write it. Returns 0 for SUCCEEDED only.
# The coordinator's log is never read for this: strings from its clients reach the log.
ddp_job_outcome() {
  local f="$1.result" line state="" mode
  if [[ ! -f $f || -L $f || ! -O $f ]]; then echo UNKNOWN; return 1; fi
  mode=$(stat -c %a -- "$f" 2>/dev/null) || { echo UNKNOWN; return 1; }
  if (((8#$mode & 8#022) != 0)); then echo UNKNOWN; return 1; fi
  while IFS= read -r line; do
    case $line in
      state=SUCCEEDED | state=STOPPED | state=FAILED)
        [[ -z $state ]] || { echo UNKNOWN; return 1; }
        state=${line#state=} ;;
    esac
  done <"$f"
  echo "${state:-UNKNOWN}"
  [[ $state == SUCCEEDED ]]
}
