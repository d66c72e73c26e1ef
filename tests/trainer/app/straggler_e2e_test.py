"""End-to-end tests of straggler detection: real ddp-trainer processes (4 local CPU workers,
Gloo on loopback, ResNet-18 on synthetic images, periodic checkpoints by rank 0), and real
slowdowns driven by this test with SIGSTOP and SIGCONT on one worker's process.

duty_cycle: rank 2 is stopped 50 ms of every 100 ms (about half speed). It must be named a
straggler with section `compute` within 30 s (the job runs with --straggler-window 10; the
default hysteresis is unit-tested in tests/coordinator/job/straggler_watch_test.cc), in the
status JSON, `ddpctl status`, /metrics and an event, with the step breakdown and ETTR shown; no
other rank may be named meanwhile. When the duty cycle stops it must clear within the window
(an event says so), or, where the host's load pushed its score under the threshold again after
the slow steps had left the scored span, within a span of the last such dip (printed).

one_slow_step: rank 2 is stopped once for 6 s (one very slow step, shorter than the window). Its
score must dip under the threshold (the slow step is seen) but it must never be named.

slow_data: a faked 2-node Slurm step (one worker a node) trains ResNet-18 on a JPEG image folder;
node 1's task runs with an LD_PRELOAD shim (slow_open_shim.c) that makes opening the folder's
files slow when the test says so, as a loaded file system behind one node does. Once the test
turns it on, rank 1 must be named within 30 s with section `data`, and cleared after it is
turned off.

Run as `python straggler_e2e_test.py CASE` (CTest registers one test per case). Needs
DDP_BIN_DIR.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

BIN = os.environ["DDP_BIN_DIR"]
TRAINER = os.path.join(BIN, "ddp-trainer")
DDPCTL = os.path.join(BIN, "ddpctl")
WINDOW = 10.0  # --straggler-window for these runs
THRESHOLD = 0.75
SLOW_RANK = 2
ARGS = ["--data", "synthetic:8192x3x32x32:10", "--arch", "resnet18", "--batch-size", "8",
        "--workers", "0", "--nprocs-per-node", "4", "--epochs", "50", "--seed", "5",
        "--print-freq", "1000", "--heartbeat-timeout", "30", "--registration-timeout", "120",
        "--checkpoint-dir", "ck", "--checkpoint-every", "40", "--linger", "0",
        "--straggler-window", str(WINDOW), "--straggler-threshold", str(THRESHOLD)]
MALLOC_ENV = ("GLIBC_TUNABLES", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def clean_env():
    return {k: v for k, v in os.environ.items()
            if not k.startswith("SLURM") and k not in MALLOC_ENV and k != "DDP_TEST_HOLD"}


class Job:
    """A ddp-trainer run in its own session (so the test can end everything it started)."""

    def __init__(self, tmp, name):
        self.tmp, self.name = tmp, name
        self.dist = os.path.join(tmp, f"dist_file.{name}")
        self.log = open(os.path.join(tmp, f"{name}.out"), "w+")
        self.p = subprocess.Popen([TRAINER] + ARGS + ["--dist-file", self.dist, "--job-id", name],
                                  cwd=tmp, env=clean_env(), stdout=self.log,
                                  stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.statuses = []

    def output(self):
        self.log.flush()
        with open(self.log.name) as f:
            out = f.read()
        try:
            with open(self.dist + ".coordinator.log") as f:
                out += "\n--- coordinator log ---\n" + f.read()[-6000:]
        except OSError:
            pass
        return out

    def fail(self, msg):
        self.stop()
        sys.exit(f"FAIL: {msg}\n{self.output()[-10000:]}")

    def status(self):
        st = subprocess.run([DDPCTL, "status", "--json", "--dist-file", self.dist],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            timeout=30)
        if st.returncode != 0:
            return None
        s = json.loads(st.stdout)
        self.statuses.append((time.time(), s))
        return s

    def status_text(self):
        return subprocess.run([DDPCTL, "status", "--dist-file", self.dist],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=30).stdout

    def metrics(self):
        fields = dict(line.split("=", 1) for line in open(self.dist).read().splitlines()
                      if "=" in line)
        req = urllib.request.Request(f"http://127.0.0.1:{fields['http_port']}/metrics",
                                     headers={"Authorization": f"Bearer {fields['view_token']}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.read().decode()

    def wait_status(self, until, timeout, what):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.p.poll() is not None:
                self.fail(f"the job ended (exit {self.p.returncode}) while waiting for {what}")
            s = self.status()
            if s is not None and until(s):
                return s
            time.sleep(0.25)
        self.fail(f"timed out after {timeout} s waiting for {what}")

    def stop(self):
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, signal.SIGCONT)
                os.killpg(self.p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.p.wait(timeout=60)


def scored(s):
    return (s["state"] == "RUNNING" and s["breakdown"] is not None
            and all(r["score"] is not None for r in s["ranks"]))


def named(s):
    return [st["rank"] for st in s["stragglers"]]


def below_threshold(s, rank):
    """Whether `rank`'s relative score in status `s` is under the threshold."""
    row = next((r for r in s["ranks"] if r["rank"] == rank), None)
    return bool(row and row["score"] and row["score"]["relative"] < THRESHOLD)


def pid_of(s, rank):
    return next(r["pid"] for r in s["ranks"] if r["rank"] == rank)


class DutyCycle:
    """Stops `pid` for `stop_s` of every `stop_s + run_s` until ended."""

    def __init__(self, pid, stop_s=0.05, run_s=0.05):
        self.pid, self.stop_s, self.run_s = pid, stop_s, run_s
        self.done = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.done.is_set():
            os.kill(self.pid, signal.SIGSTOP)
            time.sleep(self.stop_s)
            os.kill(self.pid, signal.SIGCONT)
            time.sleep(self.run_s)

    def end(self):
        self.done.set()
        self.t.join()
        os.kill(self.pid, signal.SIGCONT)


def warm(job):
    s = job.wait_status(scored, 240, "every rank scored (the job training)")
    # A little longer at full speed: the scores settle on a few spans of steps.
    time.sleep(WINDOW / 2)
    s = job.status()
    if named(s):
        job.fail(f"a straggler before any slowdown: {s['stragglers']}")
    return s


def case_duty_cycle(tmp):
    job = Job(tmp, "duty")
    s = warm(job)
    duty = DutyCycle(pid_of(s, SLOW_RANK))
    t0 = time.time()
    s = job.wait_status(lambda s: SLOW_RANK in named(s), 30, f"rank {SLOW_RANK} named")
    named_after = time.time() - t0
    st = next(x for x in s["stragglers"] if x["rank"] == SLOW_RANK)
    print(f"named after {named_after:.1f} s: {st}", flush=True)
    if st["section"] != "compute":
        job.fail(f"the cause is {st['section']}, not compute: {st}")
    if not st["relative_score"] < THRESHOLD or not st["slower"] > 1.3:
        job.fail(f"scores do not say slow: {st}")
    for key in ("host", "node", "since", "seconds"):
        if key not in st:
            job.fail(f"the straggler lacks {key}: {st}")
    others = {r for _, old in job.statuses for r in named(old)} - {SLOW_RANK}
    if others:
        job.fail(f"other ranks named meanwhile: {sorted(others)}")
    row = next(r for r in s["ranks"] if r["rank"] == SLOW_RANK)
    if row["flag"] != "straggler" or not row["score"]["straggler"]:
        job.fail(f"rank {SLOW_RANK}'s row is not flagged: {row}")
    b = s["breakdown"]
    if b is None or b["rank"] != SLOW_RANK or not b["compute"] > b["data"]:
        job.fail(f"the breakdown does not show the slow rank's compute: {b}")
    if not (0 < s["ettr"] <= 1) or s["time_use"]["training"] <= 0:
        job.fail(f"no ETTR: {s['ettr']} {s['time_use']}")
    text = job.status_text()
    print(text, flush=True)
    if not re.search(rf"STRAGGLER: rank {SLOW_RANK} \(host [^)]*\): compute [0-9.]+x slower than "
                     r"the best rank for \d+ s", text):
        job.fail(f"ddpctl status does not say why:\n{text}")
    if "step " not in text or "ETTR " not in text:
        job.fail(f"ddpctl status lacks the breakdown or ETTR:\n{text}")
    metrics = job.metrics()
    if not re.search(rf'ddp_rank_score{{rank="{SLOW_RANK}",section="compute"}} 0\.\d+', metrics):
        job.fail("no ddp_rank_score for the slow rank's compute:\n" +
                 "\n".join(l for l in metrics.splitlines() if "score" in l))
    if "ddp_stragglers 1" not in metrics or "ddp_ettr " not in metrics:
        job.fail("/metrics lacks ddp_stragglers 1 or ddp_ettr")
    if not any("is a straggler: compute" in e for e in s["events"]):
        job.fail(f"no event names it: {s['events']}")

    duty.end()
    t1 = time.time()
    s = job.wait_status(lambda s: SLOW_RANK not in named(s), WINDOW + 20,
                        f"rank {SLOW_RANK} cleared")
    cleared_at = time.time()
    cleared_after = cleared_at - t1
    print(f"cleared after {cleared_after:.1f} s", flush=True)
    # Within the window, plus one heartbeat period for the news to arrive and the poll. The rule
    # behind it: a straggler clears once its score has stayed at or above the threshold for a
    # span (a third of the window), and the slow steps leave the span a span after the end. On a
    # loaded host the score of a rank at full speed can dip under the threshold again (4 ranks
    # share 2 cores here), and each dip starts the span again: a later clear is then right only
    # if the statuses polled (every 0.25 s; the watch judges every 0.5 s) saw such a dip, after
    # the slow steps had left the span, and the clear came within a span of the last one.
    if cleared_after > WINDOW + 1.5:
        span = WINDOW / 3
        dips = [t for t, old in job.statuses
                if t1 + span + 1.5 < t < cleared_at and below_threshold(old, SLOW_RANK)]
        if not dips or cleared_at - max(dips) > span + 1.5:
            job.fail(f"cleared after {cleared_after:.1f} s, not within the {WINDOW} s window, "
                     f"and no dip under the threshold after {span + 1.5:.1f} s explains it "
                     f"(dips seen at {[round(t - t1, 1) for t in dips]} s)")
        print(f"a loaded host: its score dipped under the threshold again "
              f"{max(dips) - t1:.1f} s after the end, and it cleared "
              f"{cleared_at - max(dips):.1f} s after that (span {span:.1f} s)", flush=True)
    if not any(f"rank {SLOW_RANK} " in e and "no longer a straggler" in e for e in s["events"]):
        job.fail(f"no event says it cleared: {s['events']}")
    job.stop()


def case_one_slow_step(tmp):
    job = Job(tmp, "step")
    s = warm(job)
    pid = pid_of(s, SLOW_RANK)
    os.kill(pid, signal.SIGSTOP)
    time.sleep(WINDOW * 0.6)
    os.kill(pid, signal.SIGCONT)
    t1 = time.time()
    lowest = None
    while time.time() - t1 < WINDOW * 2.5:
        s = job.status()
        if s is None:
            continue
        row = next(r for r in s["ranks"] if r["rank"] == SLOW_RANK)
        if row["score"] is not None:
            lowest = min(1.0 if lowest is None else lowest, row["score"]["relative"])
        if SLOW_RANK in named(s):
            job.fail(f"one slow step named rank {SLOW_RANK} a straggler: {s['stragglers']}")
        time.sleep(0.25)
    if any(f"rank {SLOW_RANK} " in e and "is a straggler" in e for e in s["events"]):
        job.fail(f"an event named it: {s['events']}")
    if lowest is None:
        job.fail(f"rank {SLOW_RANK} was never scored after the slow step")
    # Whether the stop shows in the score depends on the phase it froze: time frozen inside a
    # collective wait is exposed communication, which the busy time leaves out (the other ranks
    # wait as long). Either way the rank must not be named.
    print(f"lowest relative score of rank {SLOW_RANK} after the slow step: {lowest:.2f}"
          f"{'' if lowest < THRESHOLD else ' (the stop fell in a collective wait)'}", flush=True)
    others = {r for _, old in job.statuses for r in named(old)}
    if others:
        print(f"note: other ranks named on this loaded machine: {sorted(others)}", flush=True)
    job.stop()


class SlurmStep:
    """A faked `srun` step of 2 tasks (nodes), one worker each; node 1's task preloads `shim`."""

    def __init__(self, tmp, name, args, node1_env):
        self.tmp, self.name = tmp, name
        self.dist = os.path.join(tmp, f"dist_file.{name}")
        self.log = open(os.path.join(tmp, f"{name}.out"), "w+")
        self.tasks = []
        for node in range(2):
            env = clean_env()
            env.update({"SLURM_JOB_ID": name, "SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": str(node),
                        "SLURM_LOCALID": "0", "SLURM_NODEID": str(node),
                        "SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_TASKS_PER_NODE": "1(x2)",
                        "SLURM_RESTART_COUNT": "0"})
            if node == 1:
                env.update(node1_env)
            self.tasks.append(subprocess.Popen(
                [TRAINER] + args + ["--dist-file", self.dist], cwd=tmp, env=env, stdout=self.log,
                stderr=subprocess.STDOUT, text=True, start_new_session=True))
        self.p = self.tasks[0]
        self.statuses = []


class Step(SlurmStep, Job):
    """Job's status helpers over a faked step."""

    def stop(self):
        for t in self.tasks:
            if t.poll() is None:
                try:
                    os.killpg(t.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                t.wait(timeout=60)


def case_slow_data(tmp):
    shim = os.environ.get("DDP_SLOW_OPEN_SHIM")
    if not shim or not os.path.exists(shim):
        sys.exit("FAIL: DDP_SLOW_OPEN_SHIM is not the built shim (run through ctest)")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bounded_inputs_e2e_test import make_imagefolder  # exits SKIP without Pillow
    data = os.path.join(tmp, "data")
    make_imagefolder(data, train=64, val=8, size=(48, 40))
    control = os.path.join(tmp, "slow-open-us")
    args = ["--data", f"imagefolder:{data}", "--arch", "resnet18", "--batch-size", "2",
            "--workers", "0", "--nprocs-per-node", "1", "--epochs", "500", "--seed", "5",
            "--no-eval", "--print-freq", "1000", "--heartbeat-timeout", "30",
            "--registration-timeout", "120", "--linger", "0", "--job-id", "data",
            "--straggler-window", str(WINDOW), "--straggler-threshold", str(THRESHOLD)]
    job = Step(tmp, "data", args, {"LD_PRELOAD": shim, "DDP_SLOW_OPEN_DIR": data,
                                   "DDP_SLOW_OPEN_CONTROL": control})
    warm(job)
    before = job.status()["breakdown"]
    with open(control, "w") as f:
        f.write("250000\n")  # 0.25 s to open each image: 0.5 s more per step of 2 images
    t0 = time.time()
    s = job.wait_status(lambda s: 1 in named(s), 30, "rank 1 named")
    named_after = time.time() - t0
    st = next(x for x in s["stragglers"] if x["rank"] == 1)
    print(f"named after {named_after:.1f} s: {st}", flush=True)
    print(f"breakdown before: {before}\nbreakdown now: {s['breakdown']}", flush=True)
    if st["section"] != "data":
        job.fail(f"the cause is {st['section']}, not data: {st}")
    if st["node"] != 1:
        job.fail(f"the straggler's node is {st['node']}, not 1: {st}")
    if named(s) != [1]:
        job.fail(f"other ranks named: {named(s)}")
    text = job.status_text()
    if not re.search(r"STRAGGLER: rank 1 \(host [^)]*\): data [0-9.]+x slower than the best rank",
                     text):
        job.fail(f"ddpctl status does not say why:\n{text}")
    os.remove(control)
    t1 = time.time()
    job.wait_status(lambda s: 1 not in named(s), WINDOW + 20, "rank 1 cleared")
    print(f"cleared after {time.time() - t1:.1f} s", flush=True)
    job.stop()


def main():
    case = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="ddp-straggler-") as tmp:
        {"duty_cycle": case_duty_cycle, "one_slow_step": case_one_slow_step,
         "slow_data": case_slow_data}[case](tmp)
    print(f"PASS {case}")


if __name__ == "__main__":
    main()
