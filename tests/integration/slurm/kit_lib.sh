# shellcheck shell=bash
# tests/integration/slurm/kit_lib.sh — helpers for the tests of the slurm/ kit (sourced after lib.sh).
KIT=$T_REPO/slurm
STUB=$T_REPO/tests/integration/slurm/stub-trainer.sh

# kit_submit NAME TEMPLATE SBATCH-OPTS... : submit TEMPLATE from $T_WORK/NAME with the stub as
# trainer; prints the job id. STUB_* variables set by the caller travel with --export=ALL.
kit_submit() {
  local name=$1 template=$2; shift 2
  mkdir -p "$T_WORK/$name/stub"
  (cd "$T_WORK/$name" &&
   DDP_TRAINER=$STUB STUB_OUT=$T_WORK/$name/stub \
     sbatch --parsable --export=ALL --output="$T_WORK/$name/job.out" "$@" "$KIT/$template")
}

count_files() { compgen -G "$1" | wc -l; }
have_n_files() { (($(count_files "$1") == $2)); }

# expect_file_has FILE REGEX
expect_file_has() { grep -qE -- "$2" "$1" 2>/dev/null || { echo "--- $1:"; cat "$1" 2>&1; fail "$1 does not match /$2/"; }; }
expect_file_lacks() { ! grep -qE -- "$2" "$1" 2>/dev/null || { echo "--- $1:"; cat "$1"; fail "$1 matches /$2/"; }; }

dump_case() {  # dump_case NAME JOB
  echo "===== case $1, job $2 =====" >&2
  show_job "$2" >&2
  echo "--- job.out" >&2; cat "$T_WORK/$1/job.out" >&2 2>/dev/null
  local f; for f in "$T_WORK/$1"/stub/*; do echo "--- $f" >&2; cat "$f" >&2; done
}
