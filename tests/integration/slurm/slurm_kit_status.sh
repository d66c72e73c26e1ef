#!/usr/bin/env bash
# slurm_kit_status — slurm/ddp-status.sh on a real cluster: finds a running job's dist file
# through scontrol (WorkDir), prints Slurm's view and the dashboard URL, and hands over to
# `ddpctl --dist-file F --job-id J status ...` (a fake `ddpctl status` here, so that this tests
# the script alone; the real one is tested with the real coordinator elsewhere). The script
# reads the dist file through the real `ddpctl dist-file`.
source "$(dirname "$0")/lib.sh"

body() {
  local w=$T_WORK/st job out rc
  mkdir -p "$w" "$T_WORK/bin"
  local real_ctl
  real_ctl=$(ddp_find_bin ddpctl) || fail "ddpctl not built"
  printf '#!/bin/sh\ncase " $* " in *" status "*) echo "FAKE-DDPCTL $*"; exit 7 ;; esac\nexec %s "$@"\n' \
    "$real_ctl" >"$T_WORK/bin/ddpctl"
  chmod +x "$T_WORK/bin/ddpctl"
  job=$(sbatch --parsable -N1 --chdir="$w" -o /dev/null --wrap 'sleep 120') || fail sbatch
  wait_until 30 "job $job running" job_state_is "$job" RUNNING || fail "job not running"

  note "no dist file yet -> DDP_EXIT_FAILED with a reason"
  out=$(cd / && DDP_BIN_DIR=$T_WORK/bin "$T_REPO/slurm/ddp-status.sh" "$job" 2>&1); rc=$?
  ((rc == DDP_EXIT_FAILED)) && [[ "$out" == *"no dist file at $w/dist_file.$job"* ]] || fail "missing dist file: rc=$rc out=$out"

  note "job id -> dist file in the job's WorkDir, dashboard URL, ddpctl status"
  printf 'slurm-ddp-dist-file v1\njob_id=%s\ngeneration=0\nnonce=%s\ntoken=%s\ngrpc_address=127.0.0.1:5555\nhttp_port=8123\nend=1\n' \
    "$job" "$(printf '0%.0s' {1..32})" "$(printf 'f%.0s' {1..64})" >"$w/dist_file.$job"
  chmod 0600 "$w/dist_file.$job"
  out=$(cd / && DDP_BIN_DIR=$T_WORK/bin "$T_REPO/slurm/ddp-status.sh" "$job" --json 2>&1); rc=$?
  echo "$out" | sed 's/^/    /'
  ((rc == 7)) || fail "exit code of ddpctl not passed through (rc=$rc)"
  [[ "$out" == *"slurm:     job $job RUNNING"* ]] || fail "no Slurm state line"
  [[ "$out" == *"dashboard: http://127.0.0.1:8123/"* ]] || fail "no dashboard URL"
  [[ "$out" == *"FAKE-DDPCTL --dist-file $w/dist_file.$job --job-id $job status --json"* ]] || fail "ddpctl not called as expected"

  note "dist file path -> same, without Slurm"
  out=$(DDP_BIN_DIR=$T_WORK/bin "$T_REPO/slurm/ddp-status.sh" "$w/dist_file.$job" 2>&1)
  [[ "$out" == *"FAKE-DDPCTL --dist-file $w/dist_file.$job --job-id $job status"* ]] || fail "path form: $out"
  scancel "$job"
}

slurm_test_main "$@"
