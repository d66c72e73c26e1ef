"""Chaos: one job trained twice on this machine, fault-free (the reference) and under a stream of
real faults drawn from a seed; the report says what each kind of fault cost and whether the
chaos run's final.pt is bit for bit the reference's. bench/chaos.sh drives it; the method and
the figures are in docs/bench-chaos.md.

The job: a faked 3-node Slurm step (one ddp-trainer task per node, the same environment srun
gives), nodes 0 and 1 training 2 CPU workers each (world 4, Gloo on loopback) and node 2 a spare
(--spare-nodes 1), the demo's CNN (BatchNorm) on synthetic data. Every fault is a real signal to
a real process, a killed process tree, a full file system or a relaunch, never a test hook:

  kill1               SIGKILL of one worker (any rank, rank 0 included)
  kill2               SIGKILL of a node-0 worker and a node-1 worker within one second
  stop_long           SIGSTOP of a worker past --heartbeat-timeout: it must be fenced and replaced
  stop_short          SIGSTOP of a worker for well under it, then SIGCONT: no restart allowed
                      (drawn once the launch's last recovery has resumed training, as is slow)
  coord               SIGKILL of the coordinator (task 0 restarts it from its journal)
  coord_in_recovery   SIGKILL of a worker, then of the coordinator while the job is RECOVERING
  node                SIGKILL of node 1's whole task tree (launcher and workers) while a spare
                      stands by; the spare takes over (a requeue brings the spare back)
  node0               SIGKILL of the coordinator's node: the task tree that runs the coordinator
                      (node 0's, or the node that took the job over), its workers with it, while a
                      spare stands by; the standby coordinator takes the job over
  disk_full           the checkpoint folder (its own tmpfs) filled to the last byte across a
                      periodic checkpoint, then freed
  preempt             SIGUSR1 to every process of the step (as Slurm signals a step), exit 3,
                      and the step launched again with SLURM_RESTART_COUNT + 1 (a requeue)
  slow                a worker SIGSTOPped/SIGCONTed on a 50% duty cycle for a few seconds
  kill_ckpt           SIGKILL of rank 0 the moment its checkpoint temp file appears (inotify)
  kill_eval           SIGKILL of a worker right after the last step of an epoch (its evaluation)
  kill_stopping       a worker frozen, a graceful stop asked (ddpctl stop), the frozen worker
                      SIGKILLed while the job is STOPPING: recovery, exit 3, requeue

Not in the menu: a node lost while no spare stands by (without --min-nodes
the job then fails at the recovery deadline by design; with it the world shrinks and the result
differs by design), and a full disk across the final or stop checkpoint (exit 3 by design).

Usage: chaos.py --bin DIR --work DIR [--duration MIN] [--seed S] [--every A-B] [--replay REPORT]
               [--report FILE] [--epoch-seconds S] [--min-faults N] [--min-kinds N]
Exit 0 when every fault was survived and final.pt is bit for bit the reference's, 1 otherwise,
2 on bad usage.
"""
import argparse
import ctypes
import json
import os
import random
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import threading
import time

KINDS = ["kill1", "kill2", "stop_long", "stop_short", "coord", "coord_in_recovery", "node",
         "node0", "disk_full", "preempt", "slow", "kill_ckpt", "kill_eval", "kill_stopping"]
# The numbering of the menu, for the report.
KIND_GROUP = {"kill1": 1, "kill2": 2, "stop_long": 3, "stop_short": 3, "coord": 4,
              "coord_in_recovery": 4, "node": 5, "node0": 5, "disk_full": 6, "preempt": 7, "slow": 8,
              "kill_ckpt": 9, "kill_eval": 9, "kill_stopping": 9}

# Faults whose recovery restarts the job's generation in the job (a rank or node lost).
RECOVERS = {"kill1", "kill2", "stop_long", "coord_in_recovery", "node", "node0", "kill_ckpt",
            "kill_eval"}
SETTLE_SECONDS = 30.0  # the longest a no-restart fault waits for the last recovery to resume

NODES, SPARES, PER_NODE = 2, 1, 2
WORLD = NODES * PER_NODE
BATCH = 16
HEARTBEAT_TIMEOUT = 3.0
CHECKPOINT_EVERY = 100
HANG_SECONDS = 150.0  # no step for this long (outside a fault's own wait): the job is hung
MAX_RESUBMITS = 5
WARMUP_STEPS = 20  # a launch trains this many steps before the next fault
PROGRESS = re.compile(r"^\[rank 0\] Epoch: \[(\d+)\]\[\s*(\d+)/(\d+)\]")
RESUMED = re.compile(r"^\[rank 0\] recovery \d+: .*training resumed at step (\d+),.*"
                     r"\(unix time ([0-9.]+)\)")


def log(msg):
    print(f"[chaos {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def die(msg):
    print(f"chaos: {msg}", file=sys.stderr, flush=True)
    sys.exit(2)


# --- the job ------------------------------------------------------------------------------------

class Config:
    def __init__(self, steps_per_epoch, epochs, seed):
        self.steps_per_epoch, self.epochs, self.seed = steps_per_epoch, epochs, seed

    def samples(self):
        return self.steps_per_epoch * BATCH * WORLD

    def total_steps(self):
        return self.steps_per_epoch * self.epochs

    def flags(self):
        return ["--linger", "0", "--data", f"synthetic:{self.samples()}x1x16x16:10", "--arch",
                "cnn", "--batch-size", str(BATCH), "--workers", "0", "--nprocs-per-node",
                str(PER_NODE), "--epochs", str(self.epochs), "--seed", str(self.seed),
                "--print-freq", "1", "--heartbeat-timeout", str(HEARTBEAT_TIMEOUT),
                "--checkpoint-dir", "ck", "--checkpoint-every", str(CHECKPOINT_EVERY),
                "--spare-nodes", str(SPARES), "--max-restarts", "100000",
                "--coordinator-restarts", "1000", "--registration-timeout", "60",
                "--stop-timeout", "60"]

    def as_json(self):
        return {"steps_per_epoch": self.steps_per_epoch, "epochs": self.epochs,
                "seed": self.seed}


class Task:
    """One ddp-trainer task of the faked step, in its own session, its output timestamped."""

    def __init__(self, bin_dir, folder, job_id, node, restart, flags, on_line, label):
        nodes = NODES + SPARES
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("SLURM") and k not in ("DDP_TEST_HOLD", "GLIBC_TUNABLES")}
        env.update({"SLURM_JOB_ID": job_id, "SLURM_STEP_NUM_TASKS": str(nodes),
                    "SLURM_PROCID": str(node), "SLURM_LOCALID": "0", "SLURM_NODEID": str(node),
                    "SLURM_STEP_NUM_NODES": str(nodes),
                    "SLURM_STEP_TASKS_PER_NODE": f"1(x{nodes})",
                    "SLURM_RESTART_COUNT": str(restart)})
        self.node, self.label = node, label
        self.log = open(os.path.join(folder, f"task-{label}.log"), "w")
        self.p = subprocess.Popen([os.path.join(bin_dir, "ddp-trainer")] + flags, cwd=folder,
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, start_new_session=True, bufsize=1)
        self.on_line = on_line
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.p.stdout:
            now = time.time()
            self.log.write(f"{now:.3f} {line}")
            if self.on_line:
                self.on_line(now, line.rstrip("\n"))
        self.log.flush()

    def alive(self):
        return self.p.poll() is None

    def killpg(self, sig):
        try:
            os.killpg(self.p.pid, sig)
        except ProcessLookupError:
            pass


class Timeline:
    """Rank 0's committed steps as they are printed, and the moments training resumed."""

    def __init__(self, steps_per_epoch):
        self.n = steps_per_epoch
        self.lock = threading.Lock()
        self.steps = []      # (time, global step)
        self.resumed = []    # (time, step): an in-job recovery's or a relaunch's first step
        self.launch_started = None
        self.count = 0       # progress lines seen

    def on_line(self, now, line):
        m = PROGRESS.match(line)
        with self.lock:
            if m:
                # After a recovery or a resume mid-epoch the line counts the rest of the epoch:
                # [e][i/N] with N < the epoch's steps.
                step = int(m.group(1)) * self.n + (self.n - int(m.group(3))) + int(m.group(2)) + 1
                self.count += 1
                if self.launch_started is not None:
                    self.resumed.append((now, step))
                    self.launch_started = None
                self.steps.append((now, step))
                return
            m = RESUMED.match(line)
            if m:
                self.resumed.append((float(m.group(2)), int(m.group(1))))

    def new_launch(self):
        with self.lock:
            self.launch_started = time.time()

    def last(self):
        with self.lock:
            return self.steps[-1] if self.steps else (0.0, 0)

    def step_at(self, t):
        with self.lock:
            best = 0
            for when, step in self.steps:
                if when > t:
                    break
                best = step
            return best


class Launch:
    """One launch of the faked step: NODES tasks and SPARES spare tasks. Node 1's ranks may
    move to a spare task (a takeover): task_of finds the task that runs them now."""

    def __init__(self, d, restart):
        self.d, self.restart = d, restart
        self.job_id = d.job_id
        self.dist = os.path.join(d.folder, f"dist_file.{self.job_id}")
        d.timeline.new_launch()
        self.tasks = [self.start(node) for node in range(NODES + SPARES)]
        self.killed = set()  # tasks a fault killed: their exit is no verdict on the job
        self.started = time.time()
        self.first_line = d.timeline.count

    def task_of(self, pid):
        """The task whose session `pid` is in."""
        try:
            sid = os.getsid(pid)
        except OSError:
            return None
        return next((t for t in self.tasks if t.p.pid == sid and t.alive()), None)

    def trained(self):
        """Steps printed by this launch."""
        return self.d.timeline.count - self.first_line

    def start(self, node):
        self.d.task_count += 1
        label = f"g{self.restart}-n{node}-{self.d.task_count}"
        # Every task's output is read for rank 0's lines: rank 0 moves to a spare's task when
        # its node is lost.
        return Task(self.d.bin, self.d.folder, self.job_id, node, self.restart, self.d.flags,
                    self.d.timeline.on_line, label)

    def kill_task(self, task):
        self.killed.add(task.label)
        task.killpg(signal.SIGKILL)

    def code(self):
        """The step's exit once every task a fault did not kill has ended, as srun waits for
        every task (a task that never ends is the driver's hang timeout's): a code other than 0
        and 3 wins, then 3, then 0. None while the step runs."""
        codes = [t.p.poll() for t in self.tasks if t.label not in self.killed]
        if any(c is None for c in codes):
            return None
        bad = [c for c in codes if c not in (0, 3)]
        return bad[0] if bad else (3 if 3 in codes else 0)

    def finish(self, timeout=60):
        """Waits for every task (task 0 already ended or ends within `timeout`)."""
        deadline = time.time() + timeout
        for t in self.tasks:
            try:
                t.p.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                t.killpg(signal.SIGKILL)
                t.p.wait(timeout=30)
            t.reader.join(timeout=10)

    def kill_all(self):
        for t in self.tasks:
            t.killpg(signal.SIGKILL)
        self.finish(timeout=30)

    def status(self):
        try:
            st = subprocess.run([os.path.join(self.d.bin, "ddpctl"), "status", "--json",
                                 "--dist-file", self.dist], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, timeout=20)
        except subprocess.TimeoutExpired:
            return None
        if st.returncode != 0:
            return None
        try:
            return json.loads(st.stdout)
        except ValueError:
            return None

    def wait_status(self, until, timeout, every=0.1):
        deadline = time.time() + timeout
        while time.time() < deadline and self.code() is None:
            s = self.status()
            if s is not None and until(s):
                return s
            time.sleep(every)
        return None

    def worker_pids(self):
        """{rank: pid} of a RUNNING job, or None."""
        s = self.wait_status(lambda s: s.get("state") == "RUNNING" and len(s.get("ranks", []))
                             == WORLD and all(r.get("pid") for r in s["ranks"]), 30)
        if s is None:
            return None
        return {r["rank"]: r["pid"] for r in s["ranks"]}

    def coordinator(self):
        """(pid, task) of the coordinator that serves the job: the dist_file's epoch names the
        node whose task runs it (task 0's, or a standby's after a takeover)."""
        st = self.status()
        epoch = (st or {}).get("coordinator", {}).get("epoch", 0)
        found = []
        for t in self.tasks:
            if not t.alive():
                continue
            out = subprocess.run(["pgrep", "-P", str(t.p.pid), "-x", "ddp-coordinator"],
                                 stdout=subprocess.PIPE, text=True).stdout.split()
            for pid in out:
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        argv = f.read().split(b"\0")
                except OSError:
                    continue
                e = int(argv[argv.index(b"--epoch") + 1]) if b"--epoch" in argv else 0
                found.append((e == epoch, e, int(pid), t))
        if not found:
            return None, None
        _, _, pid, task = max(found, key=lambda x: (x[0], x[1]))
        return pid, task

    def coordinator_pid(self):
        return self.coordinator()[0]


# --- faults -------------------------------------------------------------------------------------

def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def signal_pid(pid, sig):
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


class Inotify:
    """IN_CREATE events of one folder (ctypes over libc: no package needed)."""

    def __init__(self, folder):
        self.libc = ctypes.CDLL("libc.so.6", use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        if self.libc.inotify_add_watch(self.fd, folder.encode(), 0x100) < 0:  # IN_CREATE
            raise OSError(ctypes.get_errno(), "inotify_add_watch")

    def wait_name(self, pred, timeout):
        import select
        deadline = time.time() + timeout
        while time.time() < deadline:
            r, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.time()))
            if not r:
                continue
            data = os.read(self.fd, 65536)
            pos = 0
            while pos + 16 <= len(data):
                _, _, _, length = struct.unpack_from("iIII", data, pos)
                name = data[pos + 16:pos + 16 + length].split(b"\0", 1)[0].decode()
                pos += 16 + length
                if pred(name):
                    return name
        return None

    def close(self):
        os.close(self.fd)


class Fault:
    def __init__(self, index, spec):
        self.index, self.kind, self.r = index, spec["kind"], spec["r"]
        self.at = spec["at"]
        self.injected = None     # time of the (first) signal
        self.ready = None        # when the fault's own action ended
        self.detail = ""
        self.landed = True       # whether it hit the moment it aims at
        self.outcome = None      # "job", "requeue", "unrecoverable", "skipped"
        self.expectation = None  # a broken expectation (e.g. a short stop that cost a restart)
        self.lost = None

    def pick(self, i, n):
        return min(n - 1, int(self.r[i % len(self.r)] * n))


class Driver:
    def __init__(self, args, bin_dir, folder, config, tmpfs):
        self.args, self.bin, self.folder, self.config = args, bin_dir, folder, config
        self.flags = config.flags()
        self.timeline = Timeline(config.steps_per_epoch)
        self.task_count = 0
        self.job_id = "4242"
        self.tmpfs = tmpfs
        self.launches = []
        self.ends = []  # (time, exit code of task 0)
        self.done = []  # the faults injected so far, in order

    def launch(self):
        restart = len(self.launches)
        log(f"launch {restart} (SLURM_RESTART_COUNT={restart})")
        self.launches.append(Launch(self, restart))
        return self.launches[-1]

    # The faults. Each returns when its action is over; `cur()` is the running launch.
    def inject(self, f, L):
        getattr(self, "do_" + f.kind)(f, L)
        if f.ready is None:
            f.ready = time.time()

    def _victim(self, f, L, i=0, ranks=range(WORLD)):
        pids = L.worker_pids()
        if not pids:
            return None, None
        ranks = list(ranks)
        rank = ranks[f.pick(i, len(ranks))]
        return rank, pids[rank]

    def _kill(self, f, pid):
        if f.injected is None:
            f.injected = time.time()
        signal_pid(pid, signal.SIGKILL)

    def do_kill1(self, f, L):
        rank, pid = self._victim(f, L)
        if pid is None:
            return self._skip(f, "no running job")
        self._kill(f, pid)
        f.detail = f"rank {rank} (pid {pid})"

    def do_kill2(self, f, L):
        pids = L.worker_pids()
        if not pids:
            return self._skip(f, "no running job")
        a = f.pick(0, PER_NODE)
        b = PER_NODE + f.pick(1, PER_NODE)
        gap = f.r[2]
        self._kill(f, pids[a])
        time.sleep(gap)
        signal_pid(pids[b], signal.SIGKILL)
        f.detail = f"ranks {a} and {b} ({gap:.2f} s apart)"

    def do_stop_long(self, f, L):
        rank, pid = self._victim(f, L)
        if pid is None:
            return self._skip(f, "no running job")
        f.injected = time.time()
        signal_pid(pid, signal.SIGSTOP)
        hold = HEARTBEAT_TIMEOUT + 4
        deadline = time.time() + hold
        while time.time() < deadline and alive(pid):
            time.sleep(0.1)
        fenced = not alive(pid)
        signal_pid(pid, signal.SIGCONT)
        f.ready = time.time()
        f.detail = f"rank {rank} (pid {pid}) stopped; " + (
            f"fenced after {f.ready - f.injected:.1f} s" if fenced else f"not fenced in {hold} s")
        if not fenced:
            f.expectation = f"rank {rank} stopped {hold:.0f} s was not fenced"

    def _settle(self, L):
        """Waits until the last fault of this launch that restarts the generation has had its
        recovery resume training, so that a fault that must cost no restart is not charged
        with an earlier fault's (a stop_short drawn 0.1 s after a kill_eval once was). Returns
        what to add to the fault's detail."""
        last = next((f for f in reversed(self.done) if f.injected is not None
                     and f.injected >= L.started), None)
        if last is None or last.kind not in RECOVERS:
            return ""
        since = last.ready or last.injected
        start = time.time()
        while time.time() < start + SETTLE_SECONDS and L.code() is None:
            with self.timeline.lock:
                if any(when > since for when, _ in self.timeline.resumed):
                    waited = time.time() - start
                    return (f" (after fault {last.index}'s recovery resumed: waited {waited:.1f} s)"
                            if waited >= 0.1 else "")
            time.sleep(0.05)
        return (f" (fault {last.index}'s recovery had not resumed training within "
                f"{SETTLE_SECONDS:.0f} s)")

    def do_stop_short(self, f, L):
        settled = self._settle(L)
        rank, pid = self._victim(f, L)
        if pid is None:
            return self._skip(f, "no running job")
        before = self._restarts(L)
        hold = 0.3 + 0.5 * f.r[1]
        f.injected = time.time()
        signal_pid(pid, signal.SIGSTOP)
        time.sleep(hold)
        signal_pid(pid, signal.SIGCONT)
        f.ready = time.time()
        time.sleep(HEARTBEAT_TIMEOUT + 1)
        after = self._restarts(L)
        f.detail = f"rank {rank} (pid {pid}) stopped {hold:.2f} s{settled}"
        if before is not None and after is not None and after != before:
            f.expectation = f"a {hold:.2f} s stop cost {after - before} restart(s)"

    def do_coord(self, f, L):
        pid = L.coordinator_pid()
        if pid is None:
            return self._skip(f, "no coordinator process")
        self._kill(f, pid)
        f.detail = f"coordinator pid {pid}"

    def do_coord_in_recovery(self, f, L):
        rank, pid = self._victim(f, L)
        if pid is None:
            return self._skip(f, "no running job")
        self._kill(f, pid)
        s = L.wait_status(lambda s: s.get("state") == "RECOVERING", 10, every=0.02)
        cpid = L.coordinator_pid()
        if cpid is not None:
            signal_pid(cpid, signal.SIGKILL)
        f.landed = s is not None
        f.detail = (f"rank {rank} (pid {pid}), then coordinator pid {cpid} "
                    + ("while RECOVERING" if s else "(RECOVERING never seen: after it)"))

    def do_node(self, f, L):
        s = L.wait_status(lambda s: s.get("state") == "RUNNING" and s.get("spare_nodes", 0) >= 1,
                          10)
        if s is None:
            return self._skip(f, "no spare standing by")
        pids = L.worker_pids()
        victim = L.task_of(pids.get(PER_NODE)) if pids else None
        if victim is None:
            return self._skip(f, "node 1's task not found")
        f.injected = time.time()
        L.kill_task(victim)
        f.detail = f"node 1's task (pid {victim.p.pid}, {victim.label}) and its workers"

    def do_node0(self, f, L):
        s = L.wait_status(lambda s: s.get("state") == "RUNNING" and s.get("spare_nodes", 0) >= 1,
                          10)
        if s is None:
            return self._skip(f, "no spare standing by")
        if L.worker_pids() is None:
            return self._skip(f, "no running job")
        pid, victim = L.coordinator()
        if victim is None:
            return self._skip(f, "no coordinator process")
        epoch = s.get("coordinator", {}).get("epoch", 0)
        node = s.get("coordinator", {}).get("node", 0)
        f.injected = time.time()
        L.kill_task(victim)
        f.detail = (f"the coordinator's node {node} (epoch {epoch}): its task (pid "
                    f"{victim.p.pid}, {victim.label}), coordinator pid {pid} and workers")

    def do_disk_full(self, f, L):
        if not self.tmpfs:
            return self._skip(f, "no tmpfs")
        # Fill across the next periodic checkpoint, one that is neither an epoch end nor in the
        # next epoch (the last epoch's checkpoint must be written: a full disk there is exit 3).
        _, step = self.timeline.last()
        n = self.config.steps_per_epoch
        nxt = (step // CHECKPOINT_EVERY + 1) * CHECKPOINT_EVERY
        if nxt % n == 0 or (nxt - 1) // n != step // n or nxt >= self.config.total_steps() - n:
            return self._skip(f, f"no periodic checkpoint ahead in this epoch (step {step})")
        filler = os.path.join(self.folder, "ck", "chaos-filler")
        f.injected = time.time()
        with open(filler, "wb") as out:
            chunk = b"\0" * (1 << 20)
            try:
                while True:
                    out.write(chunk)
                    out.flush()
            except OSError:
                pass
        free = shutil.disk_usage(os.path.join(self.folder, "ck")).free
        deadline = time.time() + 120
        while time.time() < deadline and self.timeline.last()[1] < nxt + 2 and L.code() is None:
            time.sleep(0.05)
        os.remove(filler)
        f.ready = time.time()
        f.detail = (f"checkpoint folder full ({free} bytes free) from step {step} to "
                    f"{self.timeline.last()[1]} (periodic checkpoint of step {nxt})")

    def do_preempt(self, f, L):
        f.injected = time.time()
        for t in L.tasks:
            if t.alive():
                t.killpg(signal.SIGUSR1)
        f.detail = "SIGUSR1 to every process of the step"

    def do_slow(self, f, L):
        settled = self._settle(L)
        rank, pid = self._victim(f, L)
        if pid is None:
            return self._skip(f, "no running job")
        before = self._restarts(L)
        length = 4 + 4 * f.r[1]
        f.injected = time.time()
        end = f.injected + length
        while time.time() < end and alive(pid):
            signal_pid(pid, signal.SIGSTOP)
            time.sleep(0.1)
            signal_pid(pid, signal.SIGCONT)
            time.sleep(0.1)
        signal_pid(pid, signal.SIGCONT)
        f.ready = time.time()
        f.detail = (f"rank {rank} (pid {pid}) 100 ms stopped / 100 ms running for {length:.1f} s"
                    f"{settled}")
        after = self._restarts(L)
        if before is not None and after is not None and after != before:
            f.expectation = f"a slow rank cost {after - before} restart(s)"

    def do_kill_ckpt(self, f, L):
        pids = L.worker_pids()
        if not pids:
            return self._skip(f, "no running job")
        ino = Inotify(os.path.join(self.folder, "ck"))
        try:
            name = ino.wait_name(lambda n: ".tmp." in n and n.startswith("ckpt-"), 60)
            if name is None:
                return self._skip(f, "no checkpoint written within 60 s")
            self._kill(f, pids[0])
        finally:
            ino.close()
        f.landed = os.path.exists(os.path.join(self.folder, "ck", name))
        f.detail = f"rank 0 (pid {pids[0]}) as it wrote {name.split('.tmp.')[0]}" + (
            "" if f.landed else " (the write had already ended)")

    def do_kill_eval(self, f, L):
        rank, pid = self._victim(f, L)
        if pid is None:
            return self._skip(f, "no running job")
        n = self.config.steps_per_epoch
        _, step = self.timeline.last()
        end = (step // n + 1) * n
        if end >= self.config.total_steps():
            return self._skip(f, "no epoch end before the last")
        deadline = time.time() + 120
        while time.time() < deadline and self.timeline.last()[1] < end and L.code() is None:
            time.sleep(0.005)
        if self.timeline.last()[1] < end:
            return self._skip(f, "epoch end not reached")
        self._kill(f, pid)
        f.detail = f"rank {rank} (pid {pid}) after step {end}, the end of epoch {end // n - 1}"

    def do_kill_stopping(self, f, L):
        rank, pid = self._victim(f, L)
        if pid is None:
            return self._skip(f, "no running job")
        f.injected = time.time()
        signal_pid(pid, signal.SIGSTOP)
        subprocess.run([os.path.join(self.bin, "ddpctl"), "stop", "--dist-file", L.dist,
                        "--wait", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=30)
        s = L.wait_status(lambda s: s.get("state") == "STOPPING", 10, every=0.05)
        signal_pid(pid, signal.SIGKILL)
        f.landed = s is not None
        f.detail = f"rank {rank} (pid {pid}) frozen, ddpctl stop, killed " + (
            "while STOPPING" if s else "(STOPPING never seen)")

    def _skip(self, f, why):
        f.outcome, f.detail = "skipped", why

    def _restarts(self, L):
        s = L.status()
        return s.get("restarts") if s else None

    # The run.
    def run(self, schedule, deadline_s):
        t0 = time.time()
        self.start_time = t0
        faults = [Fault(i, spec) for i, spec in enumerate(schedule)]
        pending = list(faults)
        L = self.launch()
        resubmits = 0
        last_progress = time.time()
        done = self.done
        while True:
            code = L.code()
            if code is not None:
                L.finish()
                now = time.time()
                self.ends.append((now, code))
                log(f"launch {L.restart} ended: exit {code}")
                if code == 0:
                    break
                if code != 3:
                    resubmits += 1
                    self._blame(done, now, "unrecoverable", f"the job exited {code}")
                    if resubmits > MAX_RESUBMITS:
                        log("too many failed launches; giving up")
                        break
                else:
                    self._blame(done, now, "requeue", None)
                L = self.launch()
                last_progress = time.time()
                continue
            t_last, _ = self.timeline.last()
            last_progress = max(last_progress, t_last)
            if time.time() - last_progress > HANG_SECONDS:
                log(f"no step for {HANG_SECONDS:.0f} s: the job is hung; killing it")
                self._blame(done, time.time(), "unrecoverable", "hung")
                L.kill_all()
                self.ends.append((time.time(), "hung"))
                resubmits += 1
                if resubmits > MAX_RESUBMITS:
                    break
                L = self.launch()
                last_progress = time.time()
                continue
            if pending and time.time() - t0 >= pending[0].at and time.time() - t0 < deadline_s:
                f = pending.pop(0)
                _, step = self.timeline.last()
                if step >= self.config.total_steps() - 5:
                    self._skip(f, "the job is ending")
                elif L.trained() < WARMUP_STEPS:
                    # A fault waits until the launch has trained a little (see the report's
                    # known defects: a kill in a launch's first step).
                    pending.insert(0, f)
                    time.sleep(0.1)
                    continue
                else:
                    self.inject(f, L)
                if f.outcome != "skipped":
                    log(f"fault {f.index}: {f.kind}: {f.detail}")
                    done.append(f)
                    last_progress = time.time()
                else:
                    log(f"fault {f.index}: {f.kind} skipped: {f.detail}")
                continue
            time.sleep(0.1)
        self.end_time = time.time()
        for f in done:
            if f.outcome is None:
                f.outcome = "job"
        return faults

    def _blame(self, done, now, outcome, why):
        """The launch ended at `now`: the last fault injected before it takes the outcome when
        it has none yet (preempt and kill_stopping end a launch by design: a requeue)."""
        for f in reversed(done):
            if f.injected is not None and f.injected <= now:
                if f.outcome is None:
                    f.outcome = outcome
                    if why:
                        f.expectation = (f.expectation + "; " if f.expectation else "") + why
                return


# --- measurement --------------------------------------------------------------------------------

def time_lost(faults, timeline, step_s, end_time):
    """From a fault to the first step trained after it, less the steps' own time: lost =
    (t_r - t_f) - (S(t_r) - S(t_f)) * step_s, where t_f is the fault's first signal and t_r the
    first step printed after both its action ended and, when training resumed after it (an
    in-job recovery's first step or a relaunch's) before the next fault, that resumption."""
    done = [f for f in faults if f.outcome not in ("skipped", None) and f.injected]
    steps = list(timeline.steps)
    resumed = sorted(timeline.resumed)
    for i, f in enumerate(done):
        nxt = done[i + 1].injected if i + 1 < len(done) else end_time
        ready = max(f.ready or f.injected, f.injected)
        for when, _ in resumed:
            if f.injected < when <= nxt:
                ready = max(ready, when - 1e-3)
        t_r = next((w for w, _ in steps if w > ready), None)
        if t_r is None:
            f.lost = None
            continue
        gained = timeline.step_at(t_r) - timeline.step_at(f.injected)
        f.lost = max(0.0, (t_r - f.injected) - gained * step_s)


def pct(values, q):
    v = sorted(values)
    if not v:
        return None
    k = max(0, min(len(v) - 1, int(round(q * (len(v) - 1)))))
    return v[k]


def compare_final(a_path, b_path):
    """None when bit for bit equal, else the first difference."""
    import torch
    import torch.jit._pickle  # noqa: F401

    def load(p):
        with torch.serialization.safe_globals([torch.jit._pickle.restore_type_tag]):
            return torch.load(p)
    try:
        a, b = load(a_path), load(b_path)
    except Exception as e:  # noqa: BLE001
        return f"cannot load: {e}"
    if a.get("step") != b.get("step") or a.get("epoch") != b.get("epoch"):
        return f"positions differ: {a.get('epoch')}/{a.get('step')} vs " \
               f"{b.get('epoch')}/{b.get('step')}"
    for k in a["model"]:
        if k not in b["model"] or not torch.equal(a["model"][k], b["model"][k]):
            return f"model tensor {k}"
    for k in a["optimizer"]["momentum_buffer"]:
        if not torch.equal(a["optimizer"]["momentum_buffer"][k],
                           b["optimizer"]["momentum_buffer"][k]):
            return f"momentum {k}"
    return None


# --- reference, calibration, schedule -----------------------------------------------------------

def run_plain(d_args, bin_dir, folder, config):
    """A fault-free run of the same job: (wall seconds, median step seconds)."""
    os.makedirs(folder, exist_ok=True)
    d = Driver(d_args, bin_dir, folder, config, False)
    start = time.time()
    L = d.launch()
    while L.code() is None:
        time.sleep(0.2)
    L.finish()
    wall = time.time() - start
    if L.code() != 0:
        die(f"the fault-free run in {folder} exited {L.code()}")
    st = d.timeline.steps
    gaps = [b[0] - a[0] for a, b in zip(st, st[1:]) if b[1] == a[1] + 1]
    return wall, (statistics.median(gaps) if gaps else 0.05)


def first_fault_at(every, epoch_seconds):
    """When the first fault comes: the job starts and trains a little first."""
    return max(every[1], min(20.0, epoch_seconds / 2))


def fit_gaps(every, min_faults, ref_wall, epoch_seconds):
    """The gaps between faults, shrunk (both ends alike) when fewer than `min_faults` faults
    would fall within 85% of the fault-free run: how long the job runs depends on this machine's
    speed, and a fast machine ends the job before the last fault a slower one gets. Logged."""
    room = 0.85 * ref_wall - first_fault_at(every, epoch_seconds)
    mean = (every[0] + every[1]) / 2
    if min_faults < 2 or room <= 0 or (min_faults - 1) * mean <= room:
        return every
    f = room / ((min_faults - 1) * mean)
    fitted = (round(every[0] * f, 2), round(every[1] * f, 2))
    log(f"a fault every {fitted[0]:g}-{fitted[1]:g} s instead of {every[0]:g}-{every[1]:g} s: "
        f"--min-faults {min_faults} within 85% of the fault-free run's {ref_wall:.1f} s")
    return fitted


def make_schedule(seed, every, seconds, epoch_seconds):
    """Faults at U(a, b) gaps until `seconds`, kinds dealt from a deck of the menu that is
    shuffled again each round (every kind comes once per round)."""
    rng = random.Random(seed)
    out, t, deck = [], 0.0, []
    t = first_fault_at(every, epoch_seconds)
    while t < seconds:
        if not deck:
            deck = list(KINDS)
            rng.shuffle(deck)
        out.append({"at": round(t, 2), "kind": deck.pop(),
                    "r": [round(rng.random(), 4) for _ in range(3)]})
        t += rng.uniform(*every)
    return out


def read_replay(path):
    with open(path) as f:
        text = f.read()
    m = re.search(r"```json\n(\{.*?\})\n```", text, re.S)
    if not m:
        die(f"{path}: no ```json block with the schedule (is it a chaos report?)")
    data = json.loads(m.group(1))
    for key in ("seed", "every", "config", "schedule"):
        if key not in data:
            die(f"{path}: the schedule block lacks {key!r}")
    return data


def machine():
    try:
        model = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                     if l.startswith("model name"))
    except (OSError, StopIteration):
        model = "unknown CPU"
    return f"{os.cpu_count()} cores ({model})"


def loadavg():
    try:
        return open("/proc/loadavg").read().split()[:3]
    except OSError:
        return ["?"] * 3


def mount_tmpfs(path, size_mb):
    os.makedirs(path, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0700", "tmpfs",
                        path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return r.returncode == 0, r.stdout.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--duration", type=float, default=60.0, help="minutes of chaos")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--every", default="15-30", help="A-B: seconds between faults")
    ap.add_argument("--replay", default=None, help="a report whose schedule to run again")
    ap.add_argument("--report", default=None, help="also write the report here")
    ap.add_argument("--epoch-seconds", type=float, default=None)
    ap.add_argument("--steps-per-epoch", type=int, default=None,
                    help="size the job by hand (with --epochs) instead of by --duration")
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--min-faults", type=int, default=0)
    ap.add_argument("--min-kinds", type=int, default=0)
    a = ap.parse_args()
    a.bin, a.work = os.path.abspath(a.bin), os.path.abspath(a.work)  # the tasks run elsewhere
    m = re.fullmatch(r"([0-9.]+)-([0-9.]+)", a.every)
    if not m or float(m.group(1)) <= 0 or float(m.group(1)) > float(m.group(2)):
        die(f"--every {a.every!r}: want A-B seconds with 0 < A <= B, e.g. 15-30")
    every = (float(m.group(1)), float(m.group(2)))
    if a.duration <= 0:
        die("--duration must be positive (minutes)")
    for b in ("ddp-trainer", "ddpctl", "ddp-coordinator"):
        if not os.access(os.path.join(a.bin, b), os.X_OK):
            die(f"{os.path.join(a.bin, b)} is not built")
    os.makedirs(a.work, exist_ok=True)
    replay = read_replay(a.replay) if a.replay else None
    seed = replay["seed"] if replay else (a.seed if a.seed is not None else
                                          random.SystemRandom().randrange(1, 1 << 31))
    if replay:
        every = tuple(replay["every"])
    duration_s = a.duration * 60

    # The job, sized so that its fault-free run takes about 85% of the chaos duration.
    if replay:
        c = replay["config"]
        config = Config(c["steps_per_epoch"], c["epochs"], c["seed"])
    elif a.steps_per_epoch or a.epochs:
        if not (a.steps_per_epoch and a.epochs and a.steps_per_epoch >= 10 and a.epochs >= 2):
            die("--steps-per-epoch N (>= 10) and --epochs E (>= 2) go together")
        config = Config(a.steps_per_epoch, a.epochs, seed % 100000)
    else:
        epoch_s = a.epoch_seconds or max(20.0, min(90.0, duration_s / 12))
        cal = Config(40, 2, seed % 100000)
        _, step_s = run_plain(a, a.bin, os.path.join(a.work, "calibrate"), cal)
        per_epoch = max(60, int(epoch_s / step_s))
        epochs = max(2, int(round(0.85 * duration_s / (per_epoch * step_s))))
        config = Config(per_epoch, epochs, seed % 100000)
        log(f"calibration: {step_s * 1000:.0f} ms a step; {epochs} epochs of {per_epoch} steps")
    log(f"reference: {config.total_steps()} steps, no faults")
    load_before = loadavg()
    ref_wall, step_s = run_plain(a, a.bin, os.path.join(a.work, "reference"), config)
    log(f"reference: {ref_wall:.1f} s, {step_s * 1000:.1f} ms a step (median)")

    if a.min_faults and not replay:
        every = fit_gaps(every, a.min_faults, ref_wall, config.steps_per_epoch * step_s)
    schedule = replay["schedule"] if replay else make_schedule(
        seed, every, duration_s, config.steps_per_epoch * step_s)
    chaos_dir = os.path.join(a.work, "chaos")
    os.makedirs(chaos_dir, exist_ok=True)
    ck = os.path.join(chaos_dir, "ck")
    tmpfs, why = mount_tmpfs(ck, 32)
    if not tmpfs:
        log(f"no tmpfs for the checkpoint folder ({why}): disk_full is skipped")
    try:
        d = Driver(a, a.bin, chaos_dir, config, tmpfs)
        # Faults stop at the chaos duration (a replay: at its last fault).
        limit = (schedule[-1]["at"] + 1) if replay and schedule else duration_s
        faults = d.run(schedule, limit)
        final_diff = compare_final(os.path.join(a.work, "reference", "ck", "final.pt"),
                                   os.path.join(ck, "final.pt")) \
            if d.ends and d.ends[-1][1] == 0 else "the chaos job did not finish"
    finally:
        if tmpfs:
            # Keep final.pt for a later look, then unmount.
            if os.path.exists(os.path.join(ck, "final.pt")):
                shutil.copy(os.path.join(ck, "final.pt"), os.path.join(chaos_dir, "final.pt"))
            subprocess.run(["umount", "-l", ck], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    chaos_wall = d.end_time - d.start_time
    time_lost(faults, d.timeline, step_s, d.end_time)
    text, ok = report(a, seed, every, config, schedule, faults, ref_wall, chaos_wall, step_s,
                      final_diff, tmpfs, d, load_before, bool(replay))
    print(text, flush=True)
    if a.report:
        with open(a.report, "w") as f:
            f.write(text)
    kinds = {f.kind for f in faults if f.outcome not in ("skipped", None)}
    injected = [f for f in faults if f.outcome not in ("skipped", None)]
    if len(injected) < a.min_faults:
        print(f"chaos: FAIL: {len(injected)} faults injected, want at least {a.min_faults}")
        ok = False
    if len(kinds) < a.min_kinds:
        print(f"chaos: FAIL: {len(kinds)} kinds injected, want at least {a.min_kinds}")
        ok = False
    sys.exit(0 if ok else 1)


def report(a, seed, every, config, schedule, faults, ref_wall, chaos_wall, step_s, final_diff,
           tmpfs, d, load_before, replayed):
    L = []
    injected = [f for f in faults if f.outcome not in ("skipped", None)]
    unrec = [f for f in injected if f.outcome == "unrecoverable"]
    broken = [f for f in injected if f.expectation]
    ettr = ref_wall / chaos_wall if chaos_wall > 0 else 0
    L.append(f"chaos report: seed {seed}, a fault every {every[0]:g}-{every[1]:g} s"
             + (" (replayed schedule)" if replayed else ""))
    L.append(f"machine: {machine()}, load average {' '.join(load_before)} before the reference, "
             f"{' '.join(loadavg())} at the end")
    L.append(f"job: demo CNN (BatchNorm), world {WORLD} = {NODES} nodes x {PER_NODE} CPU "
             f"workers + {SPARES} spare node (faked Slurm step), {config.epochs} epochs x "
             f"{config.steps_per_epoch} steps = {config.total_steps()} steps, batch {BATCH}/worker, "
             f"seed {config.seed}")
    L.append("flags: " + " ".join(config.flags()))
    L.append(f"checkpoint folder: " + ("its own 32 MiB tmpfs" if tmpfs else
                                       "a plain folder (no tmpfs could be mounted: disk_full "
                                       "skipped)"))
    L.append(f"reference (no faults): {ref_wall:.1f} s; median step {step_s * 1000:.1f} ms")
    L.append(f"chaos: {chaos_wall:.1f} s, {len(d.launches)} launch(es) "
             f"(exit codes {', '.join(str(c) for _, c in d.ends)})")
    L.append("")
    L.append("| kind (menu #) | injected | survived in the job | survived by a requeue | "
             "unrecoverable | time lost median / p95 / max (s) |")
    L.append("|---|---|---|---|---|---|")
    for k in KINDS:
        fs = [f for f in injected if f.kind == k]
        if not fs:
            L.append(f"| {k} ({KIND_GROUP[k]}) | 0 | | | | |")
            continue
        lost = [f.lost for f in fs if f.lost is not None]
        fmt = (lambda v: "-" if v is None else f"{v:.1f}")
        L.append(f"| {k} ({KIND_GROUP[k]}) | {len(fs)} | "
                 f"{sum(f.outcome == 'job' for f in fs)} | "
                 f"{sum(f.outcome == 'requeue' for f in fs)} | "
                 f"{sum(f.outcome == 'unrecoverable' for f in fs)} | "
                 f"{fmt(pct(lost, 0.5))} / {fmt(pct(lost, 0.95))} / "
                 f"{fmt(max(lost) if lost else None)} |")
    lost_all = [f.lost for f in injected if f.lost is not None]
    L.append("")
    L.append(f"time lost, all faults: {sum(lost_all):.1f} s in total (the chaos run took "
             f"{chaos_wall - ref_wall:.1f} s longer than the reference)")
    L.append(f"ETTR: {100 * ettr:.1f}% (reference {ref_wall:.1f} s for the same "
             f"{config.total_steps()} steps / chaos {chaos_wall:.1f} s; a requeue's relaunch is "
             f"immediate here, no queue time)")
    L.append("final.pt: " + ("bit for bit equal to the reference (every model tensor, BatchNorm "
                             "buffers included, the momentum, step and epoch)"
                             if final_diff is None else f"DIFFERS: {final_diff}"))
    if broken:
        L.append("broken expectations:")
        for f in broken:
            L.append(f"  fault {f.index} ({f.kind}): {f.expectation}")
    skipped = [f for f in faults if f.outcome == "skipped"]
    if skipped:
        L.append(f"skipped faults: {len(skipped)} (" + "; ".join(
            f"{f.index} {f.kind}: {f.detail}" for f in skipped[:12]) + ")")
    L.append("")
    L.append("faults (seconds from the chaos start; lost as defined in docs/bench-chaos.md):")
    for f in injected:
        lost = "-" if f.lost is None else f"{f.lost:.2f}"
        L.append(f"  {f.index:3d} {f.injected - d.start_time:8.1f} s  {f.kind:18s} "
                 f"{f.outcome:13s} lost {lost:>6s} s  {f.detail}"
                 + ("" if f.landed else "  [missed its moment]"))
    ok = not unrec and final_diff is None and not broken
    L.append("")
    L.append("schedule (bench/chaos.sh --replay THIS_FILE runs it again):")
    L.append("```json")
    L.append(json.dumps({"seed": seed, "every": list(every), "config": config.as_json(),
                         "schedule": schedule}))
    L.append("```")
    L.append(f"faults {len(injected)}, unrecoverable {len(unrec)}, ETTR {100 * ettr:.1f}%, "
             + ("final.pt bit for bit equal to the reference" if final_diff is None else
                f"final.pt DIFFERS from the reference ({final_diff})"))
    return "\n".join(L) + "\n", ok


if __name__ == "__main__":
    main()
