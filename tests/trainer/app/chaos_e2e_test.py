"""A short chaos run in `make test`: bench/chaos/chaos.py with a fixed seed trains the same job
(the demo's CNN, a faked 3-node Slurm step: 2 nodes of 2 CPU workers and a spare) fault-free and
then under at least 10 real faults of at least 6 kinds (SIGKILLs of workers, of two nodes'
workers, of the coordinator, during a recovery, of a node's whole task; long and short SIGSTOPs;
a full checkpoint tmpfs; a SIGUSR1 preemption relaunched as a requeue; a slow rank; kills during
a checkpoint write, an evaluation and a stop), and asserts that none was unrecoverable and that
final.pt is bit for bit the reference's. Another seed, longer: bench/chaos.sh.

Run as `python chaos_e2e_test.py short` (CTest: chaos_e2e_short). Needs DDP_BIN_DIR and Python
torch; root for the tmpfs (without it the full-disk fault is skipped and said so).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER = os.path.join(HERE, "..", "..", "..", "bench", "chaos", "chaos.py")
SEED = int(os.environ.get("DDP_CHAOS_SEED", "20261205"))


def show_failure_logs(tmp, out, lines=40):
    """The last lines of the faulted run's coordinator logs (the last launch's and every
    standby epoch's) and of the task logs of each launch that failed (exit 1 or 4): the work
    folder is removed at the end, and a CI log is all that is left of a failure."""
    folder = os.path.join(tmp, "chaos")
    failed = set(re.findall(r"launch (\d+) ended: exit [14]\b", out))
    try:
        names = sorted(n for n in os.listdir(folder) if ".coordinator.log" in n or
                       any(n.startswith(f"task-g{g}-") for g in failed))
    except OSError:
        return
    for name in names:
        with open(os.path.join(folder, name), errors="replace") as f:
            tail = f.read().splitlines()[-lines:]
        print(f"--- the last {len(tail)} lines of {name}:")
        print("\n".join(line[:400] for line in tail))


def case_short(tmp):
    # 8 epochs of 200 steps (about a minute fault-free on 2 idle cores); a fault every 5-7 s.
    cmd = [sys.executable, DRIVER, "--bin", os.environ["DDP_BIN_DIR"], "--work", tmp,
           "--seed", str(SEED), "--every", "5-7", "--duration", "4", "--steps-per-epoch", "200",
           "--epochs", "8", "--min-faults", "10", "--min-kinds", "6",
           "--report", os.path.join(tmp, "report.md")]
    started = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=1500)
    out = p.stdout
    print(out[-12000:])
    summary = out.strip().splitlines()[-1] if out.strip() else ""
    for line in out.splitlines():
        if line.startswith("faults "):
            summary = line
    m = re.match(r"faults (\d+), unrecoverable (\d+), ETTR ([0-9.]+)%, (.*)", summary)
    if p.returncode != 0 or not m:
        show_failure_logs(tmp, out)
        sys.exit(f"FAIL: the chaos driver exited {p.returncode}: {summary}")
    if int(m.group(1)) < 10 or int(m.group(2)) != 0 or \
            m.group(4) != "final.pt bit for bit equal to the reference":
        show_failure_logs(tmp, out)
        sys.exit(f"FAIL: {summary}")
    print(f"chaos: {summary} ({time.time() - started:.0f} s in all)")


if __name__ == "__main__":
    if sys.argv[1:] != ["short"]:
        sys.exit("usage: chaos_e2e_test.py short")
    tmp = tempfile.mkdtemp(prefix="ddp-chaos-")
    try:
        case_short(tmp)
        print("PASS short")
    finally:
        subprocess.run(["umount", "-l", os.path.join(tmp, "chaos", "ck")],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)
