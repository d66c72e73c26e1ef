"""End-to-end tests of a lost coordinator (--coordinator-grace): real ddp-trainer processes (3 local
CPU workers, Gloo on loopback, the small cnn), a real SIGKILL of the coordinator while the workers
train. The workers agree through their own process group, rank 0 writes the stop checkpoint of
the last committed step, and every worker exits 3; a resume with the same flags ends with a
final.pt bitwise equal to the uninterrupted run's. Without --checkpoint-dir the exit is 4; a kill
a few steps before the end lets the run finish (final.pt, exit 0).

Run as `python grace_e2e_test.py CASE` (CTest registers one test per case). Needs DDP_BIN_DIR
and Python torch. The uninterrupted reference run is cached under DDP_E2E_CACHE (keyed by the
binary and the flags) so that the cases share it.
"""
import os
import random
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import recovery_e2e_test as R  # noqa: E402

GRACE = 2
# The trainer flags of every run of every case (the reference, the killed runs, the resumes).
# 3 workers, 1920 samples, batch 16: 40 steps per epoch, 4 epochs = 160 steps (about 45 ms each
# on 2 cores: training goes on for seconds after a kill in the first half, beyond the grace).
COMMON_ARGS = ["--linger", "0", "--data", "synthetic:1920x1x16x16:10", "--arch", "cnn",
               "--batch-size", "16", "--workers", "0", "--nprocs-per-node", "3", "--epochs", "4",
               "--seed", "7", "--print-freq", "8", "--heartbeat-timeout", "5",
               "--registration-timeout", "60", "--coordinator-grace", str(GRACE),
               # No restart from the journal: the coordinator stays lost.
               "--coordinator-restarts", "0"]
STEPS_PER_EPOCH = 40


def use_model(arch):
    """Every run of the case trains `arch` (a CASE_mlp name; R.run_case calls this)."""
    COMMON_ARGS[COMMON_ARGS.index("--arch") + 1] = arch
EPOCHS = 4
STOP_CHECK = 10  # the training loop's kStopCheckInterval


# The helpers shared with the recovery tests: environment, checks, checkpoint loading and the
# bitwise model comparison.
clean_env, expect, load, same_model = R.clean_env, R.expect, R.model_state, R.same_model


def reference():
    """final.pt of the uninterrupted run with COMMON_ARGS (cached per binary and flags)."""
    return R.cached_run(COMMON_ARGS)


class Job(R.Job):
    """A run with COMMON_ARGS (recovery_e2e_test.Job), and the coordinator it started."""

    def __init__(self, tmp, name, checkpoints=True, holds=()):
        super().__init__(tmp, name, holds=holds, args=COMMON_ARGS, checkpoints=checkpoints)

    def coordinator(self):
        """Pid of the coordinator that the launcher started."""
        deadline = time.time() + 60
        while time.time() < deadline:
            out = subprocess.run(["pgrep", "-P", str(self.p.pid), "-x", "ddp-coordinator"],
                                 stdout=subprocess.PIPE, text=True).stdout.split()
            if out:
                return int(out[0])
            time.sleep(0.05)
        self.kill()
        sys.exit(f"FAIL: no coordinator process\n{self.output()[-6000:]}")

    def wait_step(self, step, timeout=120):
        """The coordinator's step once it is >= `step` (every rank has committed it)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            s = self.status()
            if s is not None and s["state"] == "RUNNING" and s["ranks"] and \
                    min(r["step"] for r in s["ranks"]) >= step:
                return min(r["step"] for r in s["ranks"])
            if self.p.poll() is not None:
                break
            time.sleep(0.02)
        self.kill()
        sys.exit(f"FAIL: step {step} never reached\n{self.output()[-6000:]}")


def stop_checkpoint(tmp, out):
    """The newest checkpoint of the killed run (not final.pt) and its contents."""
    folder = os.path.join(tmp, "ck")
    expect(not os.path.exists(os.path.join(folder, "final.pt")), "the killed run finished", out)
    files = [f for f in os.listdir(folder) if f.endswith(".pt")]
    expect(files, "no checkpoint written", out)
    newest = max(files, key=lambda f: load(os.path.join(folder, f))["step"])
    return newest, load(os.path.join(folder, newest))


def lost_and_resumed(tmp, job, killed_at, at_step, ref, held=0):
    """The killed job exits 3 with a checkpoint at or past `at_step`; a resume ends exact.
    `held`: seconds of the time after the kill that the test kept a rank frozen."""
    code, out = job.finish(timeout=120)
    took = time.time() - killed_at
    print(f"coordinator SIGKILLed at step {at_step}; exit {code} {took:.2f} s later"
          + (f" (of which a rank was held {held} s)" if held else ""), flush=True)
    expect(code == 3, f"job exited {code}, want 3", out)
    # The grace, a heartbeat period, one RPC deadline (the grace) at an epoch's start, the steps
    # to the next agreement, the checkpoint and the exit; far less on 2 idle cores.
    expect(took < held + 3 * GRACE + 10, f"the exit took {took:.1f} s after the kill", out)
    name, ck = stop_checkpoint(tmp, out)
    print(f"stop checkpoint {name}: epoch {ck['epoch']}, step {ck['step']}, "
          f"{ck['step'] - at_step} steps past the kill, 0 lost", flush=True)
    expect(ck["step"] >= at_step, f"checkpoint at step {ck['step']} < {at_step}: steps lost", out)
    expect(ck["step"] < STEPS_PER_EPOCH * EPOCHS, "no training was left after the kill", out)
    expect(re.search(r"\[rank 0\] coordinator lost \(unreachable for [^,]+, --coordinator-grace "
                     r"2s\): stopped at step %d " % ck["step"], out),
           "rank 0 did not say why it stopped", out)
    again = Job(tmp, job.name + "-resumed")
    code, out2 = again.finish()
    expect(code == 0, f"resumed job exited {code}", out2)
    expect("resuming from" in out2, "the second run did not resume", out2)
    same_model(os.path.join(tmp, "ck", "final.pt"), ref)
    return ck


def case_killed_while_training(tmp):
    """SIGKILL of the coordinator at a random step while every rank trains."""
    ref = reference()
    job = Job(tmp, "train")
    at = job.wait_step(random.randint(5, STEPS_PER_EPOCH * EPOCHS - 90))
    os.kill(job.coordinator(), signal.SIGKILL)
    lost_and_resumed(tmp, job, time.time(), at, ref)


def case_killed_mid_epoch(tmp):
    """Rank 1 is frozen after a random step whose stop (the next agreement) falls mid-epoch; the
    coordinator is killed and the grace runs out meanwhile. The stop checkpoint holds a sampler
    position inside the epoch, and the resume continues from exactly there."""
    ref = reference()
    total = STEPS_PER_EPOCH * EPOCHS
    # The stop is the first agreement the held rank reaches: the next multiple of STOP_CHECK
    # after k, or k itself when k is one and rank 1 is held before that step's agreement (seen
    # both ways). Neither may be an epoch end.
    def mid_epoch(stop):
        return stop % STEPS_PER_EPOCH != 0

    choices = [k for k in range(3, total - STOP_CHECK - 2)
               if mid_epoch(((k // STOP_CHECK) + 1) * STOP_CHECK)
               and mid_epoch(-(-k // STOP_CHECK) * STOP_CHECK)]
    k = random.choice(choices)
    job = Job(tmp, "mid", holds=[("step", 1, k)])
    victim = job.held(0)
    os.kill(job.coordinator(), signal.SIGKILL)
    killed_at = time.time()
    time.sleep(GRACE + 1)  # the other ranks' grace runs out while they wait for rank 1
    os.kill(victim, signal.SIGCONT)
    ck = lost_and_resumed(tmp, job, killed_at, k, ref, held=GRACE + 1)
    expect(ck["step"] % STEPS_PER_EPOCH != 0, f"the stop at step {ck['step']} is an epoch end")


def case_killed_during_eval(tmp):
    """The coordinator dies while the evaluation after epoch 0 runs (rank 1 frozen in it)."""
    ref = reference()
    job = Job(tmp, "eval", holds=[("eval", 1, STEPS_PER_EPOCH)])
    victim = job.held(0)
    os.kill(job.coordinator(), signal.SIGKILL)
    killed_at = time.time()
    time.sleep(GRACE + 1)
    os.kill(victim, signal.SIGCONT)
    ck = lost_and_resumed(tmp, job, killed_at, STEPS_PER_EPOCH, ref, held=GRACE + 1)
    expect(ck["epoch"] == 1 and ck["step"] == STEPS_PER_EPOCH,
           f"the stop is at epoch {ck['epoch']}, step {ck['step']}: want the start of epoch 1")


def case_killed_near_the_end(tmp):
    """Killed a few steps before the end: training ends within the grace, final.pt is written
    (bitwise the reference) and the exit is 0, without waiting for the coordinator's calls."""
    ref = reference()
    at = STEPS_PER_EPOCH * EPOCHS - random.randint(3, 8)
    job = Job(tmp, "end", holds=[("step", 1, at)])  # the last steps are too quick to poll for
    victim = job.held(0)
    os.kill(job.coordinator(), signal.SIGKILL)
    killed_at = time.time()
    os.kill(victim, signal.SIGCONT)
    code, out = job.finish(timeout=120)
    print(f"coordinator SIGKILLed at step {at}; exit {code} {time.time() - killed_at:.2f} s later",
          flush=True)
    expect(code == 0, f"job exited {code}, want 0", out)
    same_model(os.path.join(tmp, "ck", "final.pt"), ref)


def case_killed_without_checkpoints(tmp):
    """No --checkpoint-dir: nothing to save to, exit 4 saying so."""
    job = Job(tmp, "nock", checkpoints=False)
    at = job.wait_step(random.randint(5, STEPS_PER_EPOCH))
    os.kill(job.coordinator(), signal.SIGKILL)
    killed_at = time.time()
    code, out = job.finish(timeout=120)
    print(f"coordinator SIGKILLed at step {at}; exit {code} {time.time() - killed_at:.2f} s later",
          flush=True)
    expect(code == 4, f"job exited {code}, want 4", out)
    expect(time.time() - killed_at < 3 * GRACE + 10, "the exit took too long after the kill", out)
    expect(re.search(r"error: the coordinator was lost \(unreachable for [0-9.]+m?s\) and there is "
                     r"no --checkpoint-dir to save to", out), "no message saying why", out)


if __name__ == "__main__":
    seed = int(os.environ.get("DDP_TEST_SEED", time.time_ns() % 100000))
    random.seed(seed)
    print(f"DDP_TEST_SEED={seed}", flush=True)
    R.run_case(globals(), "grace")
