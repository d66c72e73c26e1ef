# shellcheck shell=bash
# tests/integration/slurm/trainer_lib.sh — helpers for the Slurm tests that run the REAL
# ddp-trainer (sourced after lib.sh). The binaries are found by ddp_find_bin (slurm/lib/ddp.sh:
# $DDP_BIN_DIR, which CTest sets to the build's bin/, then PATH, then the repo's build/bin).
# Everything runs on CPU (--backend gloo) with a tiny synthetic data set and an MLP, so a
# 2-epoch run takes seconds.
TR_TRAINER=$(ddp_find_bin ddp-trainer) || fail "ddp-trainer not found: build first (make build) or set DDP_BIN_DIR"
TR_BIN=$(dirname "$TR_TRAINER")
TR_CTL=$TR_BIN/ddpctl
TR_PY=$(ddp_torch_python) || fail "no Python with torch (set DDP_TORCH_PYTHON or run scripts/setup-deps.sh)"

# The small CPU configuration every test uses (world sizes 2..4, 2048 samples).
TR_DATA=${TR_DATA:-synthetic:2048x1x8x8:10}
# shellcheck disable=SC2034  # used by the tests that source this file
# --linger 0: a finished job's step ends at once (no test reads a job's status after it succeeded).
TR_FLAGS=(--backend gloo --data "$TR_DATA" --arch mlp --batch-size 16 --workers 0 --epochs 2
          --print-freq 20 --heartbeat-timeout 5 --linger 0)

tr_require() {  # fail early (before the cluster starts) when the build is missing
  local b
  for b in ddp-trainer ddp-coordinator ddpctl; do
    [[ -x "$TR_BIN/$b" ]] || fail "$TR_BIN/$b not found: build first (make build) or set DDP_BIN_DIR"
  done
}

# tr_status DIST_FILE -> ddpctl --dist-file DIST_FILE status --json (empty + non-zero when not reachable)
tr_status() { "$TR_CTL" --dist-file "$1" status --json 2>/dev/null; }

# tr_json_get JSON FIELD -> top-level field (python3 is a harness requirement already)
tr_json_get() { python3 -c 'import json,sys; v=json.loads(sys.argv[1]).get(sys.argv[2]); print("" if v is None else v)' "$1" "$2" 2>/dev/null; }

tr_state_is() {  # tr_state_is DIST_FILE STATE
  local j; j=$(tr_status "$1") || return 1
  [[ "$(tr_json_get "$j" state)" == "$2" ]]
}

tr_step_at_least() {  # tr_step_at_least DIST_FILE N: RUNNING and global step >= N
  local j; j=$(tr_status "$1") || return 1
  [[ "$(tr_json_get "$j" state)" == RUNNING ]] && (($(tr_json_get "$j" step) >= $2))
}

# tr_submit NAME SBATCH-OPTS... : submits slurm/multi-node.sbatch on both nodes from
# $T_WORK/NAME (made here) with the real trainer on CPU (BACKEND=gloo ARCH=mlp BATCH_SIZE=16,
# the binaries from DDP_BIN_DIR, default $TR_BIN); DATA, EPOCHS, EXTRA_ARGS, ... set by the
# caller travel with --export=ALL. Output in $T_WORK/NAME/job.out; prints the job id.
# TR_ARCH (default mlp): the model of the exactness tests; CTest runs some of them again with
# TR_ARCH=cnn (BatchNorm buffers).
tr_submit() {
  local name=$1; shift
  mkdir -p "$T_WORK/$name"
  (cd "$T_WORK/$name" &&
   DDP_BIN_DIR=${DDP_BIN_DIR:-$TR_BIN} BACKEND=gloo ARCH=${TR_ARCH:-mlp} BATCH_SIZE=16 \
     EXTRA_ARGS="--linger 0 ${EXTRA_ARGS:-}" \
     sbatch --parsable --export=ALL --output="$T_WORK/$name/job.out" --nodes=2 --time=10 "$@" \
     "$KIT/multi-node.sbatch")
}

# tr_check_ranks JSON WORLD PER_NODE: every rank 0..WORLD-1 listed exactly once, each with
# rank == node_rank * PER_NODE + local_rank. Prints the table; non-zero + reason otherwise.
tr_check_ranks() {
  python3 - "$1" "$2" "$3" <<'EOF'
import json, sys
s = json.loads(sys.argv[1]); world = int(sys.argv[2]); per = int(sys.argv[3])
ranks = s.get("ranks", [])
for r in ranks:
    print("    rank %s host %s node %s local %s pid %s state %s step %s" % (
        r.get("rank"), r.get("host"), r.get("node_rank"), r.get("local_rank"), r.get("pid"),
        r.get("state"), r.get("step")))
got = sorted(r["rank"] for r in ranks)
if got != list(range(world)):
    sys.exit("ranks listed %s, want each of 0..%d exactly once" % (got, world - 1))
if s.get("world_size") != world or s.get("registered") != world:
    sys.exit("world_size %s registered %s, want %d" % (s.get("world_size"), s.get("registered"), world))
bad = [r for r in ranks if r["rank"] != r["node_rank"] * per + r["local_rank"]]
if bad:
    sys.exit("rank != node*%d + local for %s" % (per, bad))
pids = [r["pid"] for r in ranks]
if len(set(pids)) != world:
    sys.exit("pids not distinct: %s" % pids)
EOF
}

# tr_same_weights A.pt B.pt: the `model` state dicts are bitwise equal.
tr_same_weights() {
  "$TR_PY" - "$1" "$2" <<'EOF'
import sys, torch
a = torch.load(sys.argv[1], weights_only=False); b = torch.load(sys.argv[2], weights_only=False)
ka, kb = sorted(a["model"]), sorted(b["model"])
assert ka == kb, "different parameter names: %s vs %s" % (ka, kb)
diff = [k for k in ka if not torch.equal(a["model"][k], b["model"][k])]
print("    compared %d tensors; epoch %s/%s step %s/%s" % (len(ka), a.get("epoch"), b.get("epoch"), a.get("step"), b.get("step")))
assert not diff, "tensors differ: %s (max abs diff %s)" % (diff, max(float((a["model"][k] - b["model"][k]).abs().max()) for k in diff))
EOF
}

# tr_slow_coordinator_bin DIR: a bin dir whose ddp-coordinator starts TR_COORD_DELAY (5) s late,
# so that workers certainly find whatever dist_file already lies at their path first (stale-file
# tests). ddp-trainer runs the coordinator from its own folder (/proc/self/exe), so the trainer
# is copied, not linked; ddpctl is linked.
tr_slow_coordinator_bin() {
  local d=$1
  mkdir -p "$d"
  cp "$TR_TRAINER" "$d/ddp-trainer" || return 1
  ln -sf "$TR_CTL" "$d/ddpctl"
  printf '#!/bin/sh\nsleep %s\nexec %s/ddp-coordinator "$@"\n' "${TR_COORD_DELAY:-5}" "$TR_BIN" >"$d/ddp-coordinator"
  chmod +x "$d/ddp-coordinator"
}

# tr_write_dist_file PATH JOB GEN: a well-formed dist_file of job JOB, generation GEN, naming a
# coordinator that is not there (127.0.0.1:1), mode 0600 like a real one.
tr_write_dist_file() {
  (umask 077 && printf 'slurm-ddp-dist-file v1\njob_id=%s\ngeneration=%s\nnonce=%s\ntoken=%s\ngrpc_address=127.0.0.1:1\nhttp_port=1\nend=1\n' \
    "$2" "$3" 0123456789abcdef0123456789abcdef 00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff >"$1")
  chmod 0600 "$1"
}

dump_file() { echo "--- $1:" >&2; sed 's/^/    /' "$1" >&2 2>/dev/null; }

# Processes whose command line mentions $1 (a unique job dir / dist_file path).
procs_mentioning() {
  local s=$1 p
  for p in /proc/[0-9]*; do
    [[ ${p#/proc/} == "$$" || ${p#/proc/} == "$BASHPID" ]] && continue
    tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF -- "$s" && echo "${p#/proc/}"
  done
}

# env_of PID VAR -> the value of VAR in the environment PID started with
env_of() { tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | sed -n "s/^$2=//p" | head -1; }

# descendants PID -> PID and every process below it (one per line)
descendants() {
  local p
  echo "$1"
  for p in $(ps -o pid= --ppid "$1" 2>/dev/null); do descendants "$p"; done
}
