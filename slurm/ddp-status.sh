#!/usr/bin/env bash
# ddp-status.sh — where a slurm-ddp job stands: Slurm's view, the dashboard URL, ddpctl status.
#
#   slurm/ddp-status.sh <jobid> [ddpctl status options, e.g. --json]
#   slurm/ddp-status.sh <path/to/dist_file.JOBID> [--json]
#
# Given a job id, the dist file is <job's working dir>/dist_file.<jobid> (the templates' and
# ddp-trainer's default), found through `scontrol show job`; DIST_FILE=... overrides it.
# ddpctl is found by ddp_find_bin (lib/ddp.sh): $DDP_BIN_DIR, then PATH, then <repo>/build/bin.
# Exit: ddpctl status's code; DDP_EXIT_FAILED (ddpctl exit-codes) if the dist file cannot be read.
set -uo pipefail

# shellcheck source=lib/ddp.sh
source "$(dirname "$(readlink -f "$0")")/lib/ddp.sh" || { echo "ddp-status: cannot read lib/ddp.sh beside $0" >&2; exit 1; }
ddpctl=$(ddp_find_bin ddpctl 2>/dev/null) ||
  { echo "ddp-status: ddpctl not found (set DDP_BIN_DIR, put it on PATH, or run 'make build')" >&2; exit 1; }
ddp_load_exit_codes || exit 1
die() { echo "ddp-status: $*" >&2; exit "$DDP_EXIT_FAILED"; }
[[ $# -ge 1 && "$1" != -h && "$1" != --help ]] || { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit "$DDP_EXIT_USAGE"; }
target=$1; shift

job_id="" dist_file=""
if [[ "$target" =~ ^[0-9]+(_[0-9]+)?$ ]]; then
  job_id=$target
  if info=$(scontrol show job "$job_id" -o 2>/dev/null) && [[ -n "$info" ]]; then
    field() { tr ' ' '\n' <<<"$info" | sed -n "s/^$1=//p" | head -1; }
    echo "slurm:     job $job_id $(field JobState) (reason $(field Reason)), restarts $(field Restarts)," \
         "run time $(field RunTime) of $(field TimeLimit), nodes $(field NodeList)"
    workdir=$(field WorkDir)
  else
    echo "slurm:     job $job_id not known to scontrol (finished long ago, or another cluster)"
    workdir=$PWD
  fi
  dist_file=${DIST_FILE:-$workdir/dist_file.$job_id}
else
  dist_file=$target
  [[ "$(basename "$dist_file")" =~ ^dist_file\.([0-9]+) ]] && job_id=${BASH_REMATCH[1]}
fi

[[ -e "$dist_file" ]] || die "no dist file at $dist_file (the job has not started its coordinator yet, or runs elsewhere; set DIST_FILE=...)"
[[ -r "$dist_file" ]] || die "cannot read $dist_file (mode 0600: run as the job's owner)"
echo "dist file: $dist_file"

extra=()
[[ -n "$job_id" ]] && extra=(--job-id "$job_id")

# Dashboard: the coordinator's HTTP port on the host of its gRPC address (read through ddpctl,
# which checks the file as workers do).
grpc=$(ddp_dist_field "$dist_file" grpc_address) || die "cannot read $dist_file"
http_port=$(ddp_dist_field "$dist_file" http_port) || die "cannot read $dist_file"
host=${grpc%:*}; host=${host#[}; host=${host%]}
if [[ -n "$http_port" && "$http_port" != 0 && -n "$host" ]]; then
  [[ "$host" == *:* ]] && host="[$host]"
  echo "dashboard: http://$host:$http_port/   (metrics: http://$host:$http_port/metrics)"
else
  echo "dashboard: none (the coordinator serves no HTTP endpoint)"
fi

"$ddpctl" --dist-file "$dist_file" "${extra[@]}" status "$@"
