"""In-job recovery vs the old path, measured in the same run (bench/recovery.sh drives it).

New path: one ddp-trainer job (4 local CPU workers, the demo's CNN on Fashion-MNIST) with
--max-restarts KILLS; the harness SIGKILLs a worker (ranks in turn, rank 0 included) every
time the job has been RUNNING again for a few steps, KILLS times. Per kill:
    seconds = wall time of the first step completed after the kill - wall time of the kill
where the first time is the "unix time" that rank 0 prints in its recovery line at that step
(trainer/worker/in_job_recovery.h), and the kill time is taken right before kill(2).
Old path: the same job with --max-restarts 0 and --checkpoint-every CKPT; the harness SIGKILLs a
worker, the job fails, and the harness starts it again at once (--resume auto): seconds = wall
time of rank 0's first progress line of the new run (printed at its first step) - kill time.
The old path also recomputes the steps since its last checkpoint; they are counted, not timed.
Both: the replacement's start-up is broken down from its "replacement start-up" line.

Prints one line per kill and a summary: median and max of each path, and their ratio.
"""
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

BIN = os.environ["DDP_BIN_DIR"]
TRAINER = os.path.join(BIN, "ddp-trainer")
DDPCTL = os.path.join(BIN, "ddpctl")
KILLS = int(os.environ.get("KILLS", "10"))
OLD_KILLS = int(os.environ.get("OLD_KILLS", "3"))
CKPT = int(os.environ.get("CKPT", "100"))
WORK = os.environ["WORK"]
DATA = os.environ.get("DATA", "fashion-mnist")
WARM = os.environ.get("WARM", "1") != "0"  # also measure --warm-workers 1
COMMON = ["--nprocs-per-node", "4", "--backend", "gloo", "--data", DATA, "--arch", "cnn",
          "--batch-size", "64", "--workers", "1", "--print-freq", "1", "--no-eval",
          "--heartbeat-timeout", "5", "--registration-timeout", "60", "--seed", "1"]


class Run:
    """A ddp-trainer run whose output lines are timestamped as they arrive."""

    def __init__(self, name, args):
        self.dist = os.path.join(WORK, f"dist_file.{name}")
        self.lines = []  # (wall time, line)
        self.lock = threading.Lock()
        self.p = subprocess.Popen([TRAINER] + COMMON + args + ["--job-id", name], cwd=WORK,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  start_new_session=True, bufsize=1,
                                  env={k: v for k, v in os.environ.items()
                                       if not k.startswith("SLURM")})
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        # The job's output is also kept in the work folder (LOGS=DIR keeps it).
        with open(self.dist + ".out", "a") as log:
            for line in self.p.stdout:
                log.write(line)
                with self.lock:
                    self.lines.append((time.time(), line.rstrip("\n")))

    def snapshot(self):
        with self.lock:
            return list(self.lines)

    def status(self):
        st = subprocess.run([DDPCTL, "status", "--json", "--dist-file", self.dist],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return json.loads(st.stdout) if st.returncode == 0 else None

    def wait_for(self, pred, timeout=300, every=0.1):
        deadline = time.time() + timeout
        while time.time() < deadline:
            s = self.status()
            if s is not None and pred(s):
                return s
            if self.p.poll() is not None:
                return None
            time.sleep(every)
        return None

    def stop(self):
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.p.wait()
        self.reader.join(timeout=5)


def startup_breakdown(lines, since):
    """The replacement's own start-up phases, from its 'replacement start-up' line."""
    for t, l in lines:
        if t >= since and "replacement start-up:" in l:
            return l.split("replacement start-up:", 1)[1].strip()
    return ""


def rank0_path(line):
    """Rank 0's own path in its recovery line (trainer/worker/in_job_recovery.cc): from the
    moment it saw the failure (or, a replacement, registered) to its first step: the Rejoin's
    answer (None for a replacement), the new process group's build, the state sync, the DDP
    engine's build, and the rest (the first step)."""
    local = re.search(r"training resumed at step \d+, ([0-9.]+) s after", line)
    m = re.search(r"\((?:rejoin answered after ([0-9.]+) s, )?process group built in ([0-9.]+) s, "
                  r"state synced in ([0-9.]+) s, DDP engine built in ([0-9.]+) s\)", line)
    if not local or not m:
        return None
    rejoin = float(m.group(1)) if m.group(1) else None
    group, sync, engine = float(m.group(2)), float(m.group(3)), float(m.group(4))
    total = float(local.group(1))
    out = {"rejoin": rejoin, "group": group, "sync": sync, "engine": engine,
           "step": total - (rejoin or 0) - group - sync - engine, "total": total}
    # The first step's own breakdown: the batch's wait, then the DDP engine's phases.
    s = re.search(r"\(first step: data ([0-9.]+) s, forward ([0-9.]+) s, backward ([0-9.]+) s, "
                  r"allreduce wait ([0-9.]+) s, optimizer ([0-9.]+) s\)", line)
    if s:
        for i, k in enumerate(("data", "forward", "backward", "allreduce", "optimizer")):
            out[k] = float(s.group(i + 1))
    return out


def describe_path(p):
    if p is None:
        return "-"
    head = f"rejoin {p['rejoin']:.2f} s, " if p["rejoin"] is not None else "replacement: "
    return (f"{head}group {p['group']:.2f} s, state sync {p['sync']:.2f} s, "
            f"DDP engine {p['engine']:.2f} s, first step {p['step']:.2f} s{step_parts(p)}")


STEP_PARTS = {"data": "data", "forward": "forward", "backward": "backward",
              "allreduce": "allreduce wait", "optimizer": "optimizer"}


def step_parts(p, of=lambda p, k: p[k]):
    if "data" not in p:
        return ""
    return " (" + ", ".join(f"{n} {of(p, k):.3f} s" for k, n in STEP_PARTS.items()) + ")"


def path_medians(results):
    paths = [r[4] for r in results if r[4] is not None and r[4]["rejoin"] is not None]
    if not paths:
        return "-"
    names = {"rejoin": "rejoin", "group": "group", "sync": "state sync", "engine": "DDP engine",
             "step": "first step"}
    medians = ", ".join(f"{names[k]} {statistics.median(p[k] for p in paths):.2f} s"
                        for k in names)
    with_parts = [p for p in paths if "data" in p]
    if with_parts:
        medians += step_parts(with_parts[0],
                              lambda _, k: statistics.median(p[k] for p in with_parts))
    return medians


def new_path(name="rec", extra=()):
    """In-job recovery; `extra` flags (--warm-workers 1: each slot goes to a warm worker)."""
    label = "warm path" if "--warm-workers" in extra else "new path"
    run = Run(name, ["--epochs", "20", "--max-restarts", str(KILLS + 5)] + list(extra))
    results = []
    try:
        for k in range(KILLS):
            s = run.wait_for(lambda s: s["state"] == "RUNNING" and s["step"] >= 10 and
                             min(r["step"] for r in s["ranks"]) > 0 and
                             all(r["state"] == "training" for r in s["ranks"]))
            if s is None:
                sys.exit(f"recovery bench: the job did not reach RUNNING before kill {k + 1}\n" +
                         "\n".join(l for _, l in run.snapshot()[-40:]))
            time.sleep(1.0)  # a few steps into the generation
            rank = k % 4
            s = run.status()
            victim = next(r["pid"] for r in s["ranks"] if r["rank"] == rank)
            seen = len([l for _, l in run.snapshot() if re.search(r"\] recovery \d+: ", l)])
            t_kill = time.time()
            os.kill(victim, signal.SIGKILL)
            line = None
            deadline = time.time() + 120
            while time.time() < deadline and line is None:
                found = [l for _, l in run.snapshot() if re.search(r"\] recovery \d+: ", l)]
                if len(found) > seen:
                    line = found[seen]
                time.sleep(0.05)
            if line is None:
                sys.exit("recovery bench: no recovery line after a kill\n" +
                         "\n".join(l for _, l in run.snapshot()[-40:]))
            t_step = float(re.search(r"unix time ([0-9.]+)", line).group(1))
            coord = float(re.search(r"formed ([0-9.]+) s after the loss", line).group(1))
            results.append((rank, t_step - t_kill, coord,
                            startup_breakdown(run.snapshot(), t_kill), rank0_path(line)))
            print(f"{label} kill {k + 1}: rank {rank}: first step after {t_step - t_kill:.2f} s "
                  f"(generation formed {coord:.2f} s after the loss; replacement: "
                  f"{results[-1][3] or '-'}; rank 0: {describe_path(results[-1][4])})",
                  flush=True)
    finally:
        run.stop()
    return results


def old_path():
    results = []
    ck = os.path.join(WORK, "old-ck")
    for k in range(OLD_KILLS):
        args = ["--epochs", "20", "--max-restarts", "0", "--checkpoint-dir", ck,
                "--checkpoint-every", str(CKPT)]
        run = Run(f"old{k}", args)
        try:
            s = run.wait_for(lambda s: s["state"] == "RUNNING" and s["step"] >= CKPT + 10 and
                             s["checkpoint"] is not None)
            if s is None:
                sys.exit("old path: no checkpoint before the kill\n" +
                         "\n".join(l for _, l in run.snapshot()[-40:]))
            ckpt_step = s["checkpoint"]["step"]
            victim = next(r["pid"] for r in s["ranks"] if r["rank"] == k % 4)
            t_kill = time.time()
            os.kill(victim, signal.SIGKILL)
            run.p.wait(timeout=120)
            killed_at = max(r["step"] for r in s["ranks"])
        finally:
            run.stop()
        again = Run(f"old{k}b", args)
        try:
            first = None
            deadline = time.time() + 300
            while time.time() < deadline and first is None:
                for t, l in again.snapshot():
                    if re.match(r"\[rank 0\] Epoch: \[\d+\]", l):
                        first = t
                        break
                time.sleep(0.05)
            if first is None:
                sys.exit("old path: the restarted job printed no step\n" +
                         "\n".join(l for _, l in again.snapshot()[-40:]))
        finally:
            again.stop()
        lost = max(0, killed_at - ckpt_step)
        results.append((k % 4, first - t_kill, lost))
        print(f"old path kill {k + 1}: rank {k % 4}: first step after {first - t_kill:.2f} s, "
              f"then {lost} step(s) since checkpoint {ckpt_step} to compute again", flush=True)
    return results


def main():
    os.makedirs(WORK, exist_ok=True)
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
          f"{os.cpu_count()} CPUs", flush=True)
    new = new_path()
    warm = new_path("warm", ["--warm-workers", "1"]) if WARM else []
    old = old_path()
    new_s = [r[1] for r in new]
    warm_s = [r[1] for r in warm]
    old_s = [r[1] for r in old]
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"in-job recovery: {len(new_s)} kills, median {statistics.median(new_s):.2f} s, "
          f"max {max(new_s):.2f} s, min {min(new_s):.2f} s (kill -> first step after it)")
    print(f"  coordinator: loss -> new generation median "
          f"{statistics.median(r[2] for r in new):.2f} s")
    print(f"  rank 0, when it survived (medians, from seeing the failure): {path_medians(new)}")
    print(f"old path (fail, restart, resume from checkpoint): {len(old_s)} kills, median "
          f"{statistics.median(old_s):.2f} s, max {max(old_s):.2f} s (kill -> first step), plus "
          f"a median {statistics.median(r[2] for r in old):.0f} step(s) computed again")
    print(f"ratio old/new (medians): {statistics.median(old_s) / statistics.median(new_s):.1f}x")
    ok = statistics.median(new_s) <= 3.0 and max(new_s) <= 10.0
    print("target (median <= 3 s, max <= 10 s): " + ("met" if ok else "NOT met"))
    if warm_s:
        print(f"in-job recovery with a warm worker (--warm-workers 1): {len(warm_s)} kills, "
              f"median {statistics.median(warm_s):.2f} s, max {max(warm_s):.2f} s, min "
              f"{min(warm_s):.2f} s (kill -> first step after it); coordinator: loss -> new "
              f"generation median {statistics.median(r[2] for r in warm):.2f} s")
        print(f"  rank 0, when it survived (medians, from seeing the failure): "
              f"{path_medians(warm)}")
        print(f"ratio cold/warm (medians, the same job and kills): "
              f"{statistics.median(new_s) / statistics.median(warm_s):.1f}x")
        ok = statistics.median(warm_s) <= 0.5 and max(warm_s) <= 1.5
        print("warm target (median <= 0.5 s, max <= 1.5 s): " + ("met" if ok else "NOT met"))


if __name__ == "__main__":
    main()
