"""End-to-end tests of a node lost as a whole: real ddp-trainer tasks under a faked Slurm step
(one task per node, 2 CPU workers each, Gloo on loopback), a real SIGKILL of a node's task (its
workers die with it: PR_SET_PDEATHSIG). With a spare node (--spare-nodes 1) the spare takes over
the lost node's ranks and the run ends with a final.pt bitwise equal to the uninterrupted run;
without one the job fails at the recovery deadline naming the lost node's ranks.

Run as `python spare_e2e_test.py CASE` (CTest registers one test per case). Needs DDP_BIN_DIR and
Python torch; shares recovery_e2e_test.py's flags, reference run and checks.
"""
import atexit
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import recovery_e2e_test as R  # noqa: E402

WORKERS_PER_NODE = 2  # R.BASE trains 4 ranks: 2 job nodes of 2 workers


# Every step started, so that a failed check leaves no task behind (a stopped one included: the
# standby tests SIGSTOP whole nodes).
STEPS = []


@atexit.register
def reap_steps():
    for step in STEPS:
        step.kill_groups()


class SlurmStep:
    """One faked `srun` step: a ddp-trainer task per node, each in its own session."""

    def __init__(self, tmp, job_id, nodes, extra=(), holds=(), switches=(), restart=0):
        """`extra`: flag, value pairs (R.with_flags); `switches`: flags without a value."""
        self.tmp, self.job_id = tmp, job_id
        self.dist = os.path.join(tmp, f"dist_file.{job_id}")
        args = R.with_flags(["--nprocs-per-node", str(WORKERS_PER_NODE)] + list(extra))
        args += list(switches)
        args += ["--checkpoint-dir", "ck"]
        hold = R.hold_spec(tmp, job_id, holds)
        self.tasks = []
        STEPS.append(self)
        for node in range(nodes):
            env = {"SLURM_JOB_ID": job_id, "SLURM_STEP_NUM_TASKS": str(nodes),
                   "SLURM_PROCID": str(node), "SLURM_LOCALID": "0", "SLURM_NODEID": str(node),
                   "SLURM_STEP_NUM_NODES": str(nodes), "SLURM_STEP_TASKS_PER_NODE": f"1(x{nodes})",
                   "SLURM_RESTART_COUNT": str(restart)}
            if hold:
                env["DDP_TEST_HOLD"] = hold
            self.tasks.append(subprocess.Popen(
                [R.TRAINER] + R.NO_LINGER + args, cwd=tmp, env=R.clean_env(env),
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                start_new_session=True))

    def held(self, index, timeout=120):
        pid = R.held_pid(R.hold_marker(self.tmp, self.job_id, index),
                         lambda: self.tasks[0].poll() is None, timeout)
        if pid is None:
            self.kill()
            sys.exit(f"FAIL: hold {index} never stopped a worker\n" + self.outputs()[-6000:])
        return pid

    def finish(self, timeout=300):
        self.out = []
        deadline = time.time() + timeout
        for t in self.tasks:
            try:
                self.out.append(t.communicate(timeout=max(1, deadline - time.time()))[0])
            except subprocess.TimeoutExpired:
                self.kill()
                sys.exit(f"FAIL: a task still runs after {timeout} s\n" + self.outputs())
        return [t.returncode for t in self.tasks], self.out

    def outputs(self):
        return "\n".join(f"--- task {i}\n{o}" for i, o in enumerate(getattr(self, "out", [])))

    def kill_groups(self):
        """SIGKILLs every task's process group still there (its workers, its coordinator)."""
        for t in self.tasks:
            if t.poll() is None:
                try:
                    os.killpg(t.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def kill(self):
        self.kill_groups()
        self.out = [t.communicate(timeout=30)[0] for t in self.tasks]

    def coordinator_log(self):
        with open(self.dist + ".coordinator.log") as f:
            return f.read()


def case_node_lost_spare_takes_over(tmp):
    """2 nodes + 1 spare. Rank 2 (node 1) is frozen after step 10, then node 1's task is
    SIGKILLed: both its workers die. They go silent, the spare takes over node 1's ranks with
    state from the survivors, and final.pt is bitwise the uninterrupted 4-worker run's."""
    ref = R.reference()
    step = SlurmStep(tmp, "5151", 3, ["--spare-nodes", "1", "--heartbeat-timeout", "5"],
                     holds=[("step", 2, 10)])
    step.held(0)
    killed_at = time.time()
    os.kill(step.tasks[1].pid, signal.SIGKILL)
    codes, outs = step.finish()
    all_out = step.outputs()
    R.expect(codes == [0, -signal.SIGKILL, 0], f"task exit codes {codes}", all_out)
    R.same_model(os.path.join(tmp, "ck", "final.pt"), ref)
    log = step.coordinator_log()
    R.expect(re.search(r"spare node 2 \(host [^,]+, pid \d+\) stands by with 2 workers", log),
             "the spare never stood by", log)
    R.expect(re.search(r"lost node 1 \(host [^,]+, ranks 2,3\): its task and workers went "
                       r"silent; spare node 2 .* takes over its ranks", log),
             "the coordinator log does not show the takeover", log)
    R.expect("restart 2 of 3" in log, "a lost node of 2 ranks should cost 2 restarts", log)
    R.expect(re.search(r"taking over node 1 \(host [^,]+, ranks 2,3\): starting its workers as "
                       r"node 1", outs[2]), "the spare task does not log its takeover", outs[2])
    R.expect("resuming from" not in all_out, "a checkpoint file was read", all_out)
    lines = [l for l in outs[0].splitlines() if re.match(r"\[rank 0\] recovery \d+: ", l)]
    R.expect(lines, "rank 0 printed no recovery line", outs[0])
    print("\n".join(lines))
    print(f"job ended {time.time() - killed_at:.1f} s after the kill")


def case_preempted_while_the_spare_takes_over(tmp):
    """2 nodes + 1 spare. Node 1's task is SIGKILLed (rank 2 frozen after step 10; its workers
    die with it), and once the job is RECOVERING, SIGUSR1 goes to every task, the spare's too, as
    Slurm signals a step before its time limit. The coordinator's stop waits for the recovery,
    which needs the spare: the spare stays (before the fix it left at once, the recovery timed out
    after a minute and the job FAILED, exit 4: no requeue), takes node 1 over, and every rank
    checkpoints and stops: exit 3. The requeue resumes from that checkpoint and ends bit for bit
    as the uninterrupted run."""
    ref = R.reference()
    flags = ["--spare-nodes", "1", "--heartbeat-timeout", "5"]
    step = SlurmStep(tmp, "5157", 3, flags, holds=[("step", 2, 10)])
    step.held(0)
    os.kill(step.tasks[1].pid, signal.SIGKILL)
    deadline = time.time() + 60
    state = None
    while time.time() < deadline and state != "RECOVERING":
        st = subprocess.run([R.DDPCTL, "status", "--json", "--dist-file", step.dist],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            timeout=30, cwd=tmp)
        state = json.loads(st.stdout)["state"] if st.returncode == 0 else None
        time.sleep(0.05)
    R.expect(state == "RECOVERING", f"the job never recovered from node 1's loss ({state})")
    for i in (0, 2):
        os.kill(step.tasks[i].pid, signal.SIGUSR1)
    codes, outs = step.finish()
    all_out = step.outputs()
    R.expect(codes == [3, -signal.SIGKILL, 3], f"task exit codes {codes}, want [3, -9, 3]",
             all_out + step.coordinator_log())
    R.expect("received SIGUSR1; the spare stands by until the job's stop ends" in outs[2],
             "the spare does not say it stays", outs[2])
    R.expect(re.search(r"taking over node 1 \(host [^,]+, ranks 2,3\): starting its workers as "
                       r"node 1", outs[2]), "the spare did not take node 1 over", outs[2])
    requeue = SlurmStep(tmp, "5157", 3, flags, restart=1)
    codes, outs = requeue.finish()
    all_out = requeue.outputs()
    R.expect(codes == [0, 0, 0], f"requeue exit codes {codes}", all_out)
    R.expect("resuming from" in all_out, "the requeue did not resume from the stop's checkpoint",
             all_out)
    R.same_model(os.path.join(tmp, "ck", "final.pt"), ref)
    print([l for l in outs[0].splitlines() if "resuming from" in l][0])


def case_spare_leaves_with_the_job(tmp):
    """2 nodes + 1 spare, no fault, --linger 0: the coordinator is gone the moment the job
    succeeds, so the spare, which then gets no answer, learns the end from the job's result file
    and leaves at once (exit 0), instead of after its unanswered wait; the step ends with it."""
    step = SlurmStep(tmp, "5555", 3, ["--spare-nodes", "1"])
    step.tasks[0].wait(timeout=120)
    job_ended = time.time()
    codes, outs = step.finish(timeout=120)
    spare_left = time.time() - job_ended
    all_out = step.outputs()
    R.expect(codes == [0, 0, 0], f"task exit codes {codes}", all_out)
    R.expect(re.search(r"job SUCCEEDED \(.*dist_file\.5555\.result\); the spare was not needed",
                       outs[2]) or "job SUCCEEDED; the spare was not needed" in outs[2],
             "the spare does not say why it left", outs[2])
    print(f"the spare's task ended {spare_left:.1f} s after task 0's")
    R.expect(spare_left < 10, f"the spare left {spare_left:.1f} s after the job ended", all_out)


def case_node_lost_without_spare(tmp):
    """2 nodes, no spare: node 1's task is SIGKILLed; its ranks go silent and nobody takes them,
    so the job fails at the recovery deadline (exit 4) naming node 1's ranks."""
    step = SlurmStep(tmp, "5252", 2, ["--heartbeat-timeout", "5", "--registration-timeout", "15"],
                     holds=[("step", 2, 6)])
    step.held(0)
    os.kill(step.tasks[1].pid, signal.SIGKILL)
    codes, outs = step.finish(timeout=120)
    all_out = step.outputs()
    R.expect(codes[0] == 4, f"node 0's task exited {codes[0]}, want 4", all_out)
    log = step.coordinator_log()
    R.expect(re.search(r"rank 2 \(node 1 local rank 0", log) and
             re.search(r"rank 3 \(node 1 local rank 1", log),
             "the failure does not name node 1's ranks", log)


def ceil_div(a, b):
    return -(-a // b)


def case_node_lost_shrinks(tmp):
    """3 nodes, no spare, --min-nodes 2: node 1's task is SIGKILLed after step K of epoch 0. The
    job drops node 1 and goes on with world 4: the rest of epoch 0's order is re-split over the
    4 survivors (the coordinator's ledger line accounts for every position), and the run ends
    with exactly the steps that split implies (K + the rest of epoch 0 at world 4 + 2 full
    epochs at world 4)."""
    k, n, batch, epochs = 3, 512, 16, 3
    step = SlurmStep(tmp, "5353", 3, ["--min-nodes", "2", "--heartbeat-timeout", "5"],
                     holds=[("step", 2, k)])
    step.held(0)
    os.kill(step.tasks[1].pid, signal.SIGKILL)
    codes, outs = step.finish()
    all_out = step.outputs()
    R.expect(codes == [0, -signal.SIGKILL, 0], f"task exit codes {codes}", all_out)
    log = step.coordinator_log()
    R.expect(re.search(r"lost node 1 \(host [^,]+, ranks 2,3\): its task and workers went silent; "
                       r"no spare standing by: the job goes on without it on 2 node\(s\), world "
                       r"6 -> 4 \(--min-nodes 2\)", log), "the coordinator did not drop node 1", log)
    total = ceil_div(n, 6) * 6  # epoch 0's order at world 6, padded
    consumed = k * batch * 6
    rest = total - consumed
    per_rank = ceil_div(rest, 4)
    m = re.search(r"epoch 0 re-split: positions \[0, (\d+)\) of its order \((\d+), world 6\) "
                  r"were read; the other (\d+) go to world 4, (\d+) per rank", log)
    R.expect(m, "no ledger line for the re-split", log)
    got = tuple(int(g) for g in m.groups())
    R.expect(got == (consumed, total, rest, per_rank),
             f"ledger {got}, want {(consumed, total, rest, per_rank)}", log)
    R.expect(got[0] + got[2] == got[1], "the ledger does not account for every position", log)
    final = R.model_state(os.path.join(tmp, "ck", "final.pt"))
    want_step = k + ceil_div(per_rank, batch) + (epochs - 1) * ceil_div(n // 4, batch)
    R.expect(final["epoch"] == epochs and final["step"] == want_step,
             f"final.pt at epoch {final['epoch']} step {final['step']}, want {epochs}/{want_step}",
             all_out)
    R.expect("resuming from" not in all_out, "a checkpoint file was read", all_out)
    print(m.group(0))
    print(f"final step {final['step']} (= {k} + {ceil_div(per_rank, batch)} + "
          f"{(epochs - 1) * ceil_div(n // 4, batch)})")


# A longer run for the straggler replacement: 1,024 steps per epoch (65,536 samples, batch 16,
# world 4), so that the job trains at full speed, slowly, and again at full speed after the swap.
# No evaluation and no periodic checkpoint: the rates before and after the swap compare steps only.
# Long enough that, after the scoring, the 6 s rate before the slowdown, the slowdown until the
# swap and the 2 + 6 s after it, the job still runs: with 4 epochs a fast run once ended 6 s
# after the swap, before the test saw the spare's generation running.
STRAGGLER_RUN = ["--data", "synthetic:65536x1x8x8:10", "--epochs", "6", "--print-freq", "1000",
                 "--checkpoint-every", "100000"]
STRAGGLER_WINDOW = 3.0


def status(dist):
    p = subprocess.run([R.DDPCTL, "status", "--json", "--dist-file", dist], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True, timeout=30)
    return json.loads(p.stdout) if p.returncode == 0 else None


def wait_status(step, until, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if step.tasks[0].poll() is not None:
            step.kill()
            sys.exit(f"FAIL: the job ended while waiting for {what}\n" + step.outputs()[-6000:])
        s = status(step.dist)
        if s is not None and until(s):
            return s
        time.sleep(0.2)
    step.kill()
    sys.exit(f"FAIL: timed out after {timeout} s waiting for {what}\n" + step.outputs()[-6000:])


def rate(step, seconds):
    """The job's steps per second over `seconds` of wall time, from its status (the global step;
    every step is the same global batch, so this is its samples/s over the batch)."""
    first = wait_status(step, lambda s: s["state"] == "RUNNING", 30, "the job running")
    t0 = time.time()
    time.sleep(seconds)
    last = wait_status(step, lambda s: s["state"] == "RUNNING", 30, "the job running")
    return (last["step"] - first["step"]) / (time.time() - t0)


class DutyCycle:
    """Stops `pid` for 50 ms of every 100 ms (about half speed) until it ends or is ended."""

    def __init__(self, pid):
        self.pid, self.done = pid, threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        try:
            while not self.done.is_set():
                os.kill(self.pid, signal.SIGSTOP)
                time.sleep(0.05)
                os.kill(self.pid, signal.SIGCONT)
                time.sleep(0.05)
        except ProcessLookupError:
            pass  # fenced: the node went to the spare

    def end(self):
        self.done.set()
        self.t.join()
        try:
            os.kill(self.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


def case_straggler_replaced_by_spare(tmp):
    """2 nodes + 1 spare, --straggler-action replace. Rank 2 (node 1) is slowed to about half
    speed by a SIGSTOP/SIGCONT duty cycle. It is named a straggler, its node is handed to the
    spare inside the job (node 1's workers fenced, its task leaves with exit 0), the spare's
    workers take ranks 2 and 3 with state from the survivors, the job's samples/s comes back to
    to the rate before the slowdown (stated; at least 0.8x asserted), and final.pt is bitwise the
    uninterrupted run's."""
    run = list(STRAGGLER_RUN)
    cnn = R.BASE[R.BASE.index("--arch") + 1] == "cnn"
    if cnn:
        # The CNN (BatchNorm buffers: the old workers are killed mid-step) steps ~2x slower:
        # 512 steps per epoch. Its rate is printed, not judged (the MLP case judges it). Run by
        # hand (CASE straggler_replaced_by_spare_cnn); make test runs the MLP case.
        run[run.index("--data") + 1] = "synthetic:32768x1x8x8:10"
    ref = R.cached_run(R.NO_LINGER + R.with_flags(run) + ["--no-eval"])
    step = SlurmStep(tmp, "5454", 3, run + [
        "--spare-nodes", "1", "--heartbeat-timeout", "5", "--straggler-action", "replace",
        "--straggler-window", str(STRAGGLER_WINDOW)], switches=["--no-eval"])
    s = wait_status(step, lambda s: s["state"] == "RUNNING" and s["spare_nodes"] == 1 and
                    s["breakdown"] is not None and all(r["score"] for r in s["ranks"]),
                    180, "every rank scored and the spare standing by")
    before = rate(step, 6)
    slow_pid = next(r["pid"] for r in s["ranks"] if r["rank"] == 2)
    duty = DutyCycle(slow_pid)
    t0 = time.time()
    wait_status(step, lambda s: s["membership_generation"] >= 1, 60, "the spare's generation")
    replaced_after = time.time() - t0
    duty.end()
    wait_status(step, lambda s: s["state"] == "RUNNING" and all(
        r["pid"] != slow_pid for r in s["ranks"]), 60, "the job running on the spare")
    time.sleep(2)
    after = rate(step, 6)
    codes, outs = step.finish()
    all_out = step.outputs()
    R.expect(codes == [0, 0, 0], f"task exit codes {codes}, want [0, 0, 0]", all_out)
    R.same_model(os.path.join(tmp, "ck", "final.pt"), ref)
    log = step.coordinator_log()
    R.expect(re.search(r"rank 2 \(.*\) is a straggler: \w+ [0-9.]+x slower than the best rank .*"
                       r"--straggler-action replace", log), "rank 2 was not named", log)
    R.expect(re.search(r"--straggler-action replace: node 1 \(host [^,]+, ranks 2,3\) is handed "
                       r"to spare node 2 \(host [^,]+, pid \d+\), in the job", log),
             "the coordinator log does not show the replacement", log)
    R.expect(re.search(r"replaced: its node is a \w+ straggler", log), "no loss for the swap", log)
    R.expect(re.search(r"node 1 local rank \d \(pid \d+\), replaced, .*its node's task leaves", log),
             "the old node's task was not told to leave", log)
    R.expect("retired this node (its node was handed to a spare" in outs[1] and
             "leaving" in outs[1], "node 1's task does not say it leaves", outs[1])
    R.expect(re.search(r"taking over node 1 .*: starting its workers as node 1", outs[2]),
             "the spare task does not log its takeover", outs[2])
    R.expect("resuming from" not in all_out, "a checkpoint file was read", all_out)
    ratio = after / before if before else 0
    print(f"replaced {replaced_after:.1f} s after the slowdown began; steps/s before the "
          f"slowdown {before:.1f}, after the swap {after:.1f} ({ratio:.2f}x; the global batch is "
          f"the same, so samples/s is in the same ratio)")
    # A half-speed node left in place would keep the job near 0.5x. One 6 s window of this MLP
    # on 2 shared cores varies by about 15% from the next, so the bar here is 0.8x; the ratios
    # measured over repeated runs are in docs/operations.md ("Acting on a straggler").
    R.expect(cnn or ratio >= 0.8, f"samples/s after the swap is {ratio:.2f}x the rate before",
             all_out)


if __name__ == "__main__":
    R.run_case(globals(), "spare")
