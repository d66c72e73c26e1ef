#!/usr/bin/env bash
# Runs every test of a build in one CTest run and fails if any test lacks a label.
#   scripts/run-tests.sh BUILD_DIR [extra ctest args, e.g. -L unit]
# Unit tests run two at a time; integration, Slurm and GPU tests carry RUN_SERIAL (they start
# their own processes and clusters and would only fight over two cores). CTest's "Label Time
# Summary" at the end gives each label's wall time.
#
# A skipped test is never a pass: GoogleTest binaries exit 77 when a test called GTEST_SKIP
# (tests/testing/skip_aware_main.cc) and script tests exit 77 when they cannot run; CTest counts
# them as "Skipped", and the summary at the end names each one with the reason it printed, and
# each failed test with the last lines of its output.
set -uo pipefail
build="${1:-build}"
shift || true
unlabelled=$(ctest --test-dir "$build" -N -LE '^(unit|integration|slurm|gpu)$' | grep -c 'Test *#' || true)
if ((unlabelled > 0)); then
  echo "error: $unlabelled test(s) carry none of the labels unit/integration/slurm/gpu:" >&2
  ctest --test-dir "$build" -N -LE '^(unit|integration|slurm|gpu)$' >&2
  exit 1
fi
junit="$(cd "$build" && pwd)/Testing/ddp-results.xml"
mkdir -p "$(dirname "$junit")"
rm -f "$junit"
ctest --test-dir "$build" --output-on-failure -j2 --output-junit "$junit" "$@"
rc=$?

# Summary: counts, then every skipped test with the lines that say why.
if [[ -s "$junit" ]]; then
  python3 - "$junit" "$build" <<'EOF'
import re, sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
cases = root.iter("testcase")
passed, failed, skipped = [], [], []
for c in cases:
    status = c.get("status", "")
    if c.find("skipped") is not None or status in ("skipped", "notrun", "disabled"):
        out = (c.findtext("system-out") or "")
        why = [l.strip() for l in out.splitlines() if re.match(r"SKIP(PED)?[: ]", l)]
        why = why or ["(no reason printed)"]
        skipped.append((c.get("name"), why))
    elif c.find("failure") is not None or c.find("error") is not None or status == "fail":
        failed.append((c.get("name"), (c.findtext("system-out") or "").rstrip().splitlines()))
    else:
        passed.append(c.get("name"))
print(f"\n== {sys.argv[2]}: {len(passed)} passed, {len(failed)} failed, "
      f"{len(skipped)} SKIPPED (not run, not counted as passed)")
for name, why in skipped:
    print(f"   SKIPPED {name}")
    for w in why[:8]:
        print(f"       {w}")
# A failed test's last lines again, here at the end: a CI log that keeps only its tail keeps why.
for name, lines in failed:
    print(f"   FAILED  {name} (its last {min(len(lines), 30)} lines of output:)")
    for line in lines[-30:]:
        print(f"       | {line[:300]}")
EOF
fi
exit $rc
