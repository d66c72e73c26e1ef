"""End-to-end tests of a node lost as a whole: real ddp-trainer tasks under a faked Slurm step
(one task per node, 2 CPU workers each, Gloo on loopback), a real SIGKILL of a node's task (its
workers die with it: PR_SET_PDEATHSIG). With a spare node (--spare-nodes 1) the spare takes over
the lost node's ranks and the run ends with a final.pt bitwise equal to the uninterrupted run;
without one the job fails at the recovery deadline naming the lost node's ranks.

Run as `python spare_e2e_test.py CASE` (CTest registers one test per case). Needs DDP_BIN_DIR and
Python torch; shares recovery_e2e_test.py's flags, reference run and checks.
"""
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import recovery_e2e_test as R  # noqa: E402

WORKERS_PER_NODE = 2  # R.BASE trains 4 ranks: 2 job nodes of 2 workers


class SlurmStep:
    """One faked `srun` step: a ddp-trainer task per node, each in its own session."""

    def __init__(self, tmp, job_id, nodes, extra=(), holds=()):
        self.tmp, self.job_id = tmp, job_id
        self.dist = os.path.join(tmp, f"dist_file.{job_id}")
        args = R.with_flags(["--nprocs-per-node", str(WORKERS_PER_NODE)] + list(extra))
        args += ["--checkpoint-dir", "ck"]
        hold = R.hold_spec(tmp, job_id, holds)
        self.tasks = []
        for node in range(nodes):
            env = {"SLURM_JOB_ID": job_id, "SLURM_STEP_NUM_TASKS": str(nodes),
                   "SLURM_PROCID": str(node), "SLURM_LOCALID": "0", "SLURM_NODEID": str(node),
                   "SLURM_STEP_NUM_NODES": str(nodes), "SLURM_STEP_TASKS_PER_NODE": f"1(x{nodes})",
                   "SLURM_RESTART_COUNT": "0"}
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

    def kill(self):
        for t in self.tasks:
            try:
                os.killpg(t.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
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


if __name__ == "__main__":
    R.run_case(globals(), "spare")
