"""End-to-end tests of a coordinator that comes back: real ddp-trainer processes (4 local CPU
workers, Gloo on loopback) whose coordinator is SIGKILLed mid-training. Task 0 restarts it from
its journal (<dist_file>.journal) with --resume-from-journal; the workers re-attach to the new
incarnation without stopping, and the run ends exactly as an uninterrupted one. A corrupt journal
is refused in one line and the coordinator is not restarted again.

The kill happens while a worker is frozen by the test hook (DDP_TEST_HOLD, trainer/worker/
test_hold.h) at a random step, so that it is always mid-training; the worker is let go right
after the kill.

Run as `python coordinator_restart_e2e_test.py CASE`. Needs DDP_BIN_DIR and Python torch; shares
the helpers (and DDP_E2E_CACHE) of recovery_e2e_test.py.
"""
import os
import random
import re
import signal
import subprocess
import sys
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import recovery_e2e_test as R  # noqa: E402
import spare_e2e_test as S  # noqa: E402 (a faked Slurm step: one task per node)

# 4 workers, 512 samples, batch 16: 8 steps per epoch, 3 epochs = 24 steps; checkpoints every 4.
R.BASE = ["--data", "synthetic:512x1x8x8:10", "--arch", "mlp", "--batch-size", "16",
          "--workers", "0", "--print-freq", "4", "--heartbeat-timeout", "5", "--nprocs-per-node",
          "4", "--epochs", "3", "--seed", "11", "--checkpoint-every", "4",
          "--registration-timeout", "60", "--coordinator-restarts", "3"]
TOTAL_STEPS = 24
STATUS_WITHIN_S = 10.0

# How a job ends when its coordinator is gone for good: after --coordinator-grace the workers
# agree through their process group, write a checkpoint and exit 3 (resumable).
LOST_COORDINATOR_EXITS = (3,)


def coordinator_pid(job):
    out = subprocess.run(["pgrep", "-P", str(job.p.pid), "-x", "ddp-coordinator"],
                         stdout=subprocess.PIPE, text=True).stdout.split()
    R.expect(len(out) == 1, f"want one coordinator child of {job.p.pid}, found {out}")
    return int(out[0])


def incarnation(dist):
    try:
        with open(dist) as f:
            m = re.search(r"^incarnation=(\d+)$", f.read(), re.M)
    except OSError:
        return -1
    return int(m.group(1)) if m else 0


def corrupt_record(journal, index):
    """Flips a payload byte of record `index` (0: the header), which is not the last one: a
    damaged last record reads as torn by a crash mid-append and is dropped instead."""
    with open(journal, "r+b") as f:
        data = f.read()
        frames, pos = [], 0
        while pos + 8 <= len(data):
            length = int.from_bytes(data[pos:pos + 4], "little")
            frames.append((pos, length))
            pos += 8 + length
        R.expect(len(frames) > index + 1, f"journal has only {len(frames)} records")
        at = frames[index][0] + 8 + frames[index][1] // 2
        f.seek(at)
        f.write(bytes([data[at] ^ 0x40]))


def kill_coordinator_at(job, step):
    """Kills the coordinator while the worker held at `step` is frozen, then lets it go."""
    held = job.held(0)
    victim = coordinator_pid(job)
    os.kill(victim, signal.SIGKILL)
    killed_at = time.time()
    os.kill(held, signal.SIGCONT)
    print(f"coordinator (pid {victim}) killed at step {step}")
    return killed_at


def case_kill(tmp):
    ref = R.reference()
    step = random.Random().randint(3, TOTAL_STEPS - 4)
    job = R.Job(tmp, "crk", holds=[("step", 1, step)])
    killed_at = kill_coordinator_at(job, step)
    # ddpctl status against the new incarnation: it reads the dist_file on each call.
    deadline = killed_at + 60
    answered = None
    while time.time() < deadline and job.p.poll() is None:
        if incarnation(job.dist) >= 1 and job.status() is not None:
            answered = time.time() - killed_at
            break
        time.sleep(0.05)
    code, out = job.finish()
    R.expect(answered is not None, "ddpctl status never answered the restarted coordinator", out)
    print(f"ddpctl status answered {answered:.2f} s after the SIGKILL")
    R.expect(answered < STATUS_WITHIN_S, f"status took {answered:.1f} s (want < {STATUS_WITHIN_S})")
    R.expect(code == 0, f"job exited {code}, want 0", out)
    R.expect(out.count("restarting it from its journal (1 of 3)") == 1, "no restart logged", out)
    log = job.coordinator_log()
    R.expect("restored from the journal (incarnation 1)" in log, "the journal was not used", log)
    R.same_model(os.path.join(tmp, "ck", "final.pt"), ref)


def case_corrupt_journal(tmp):
    # Long enough that the workers still train when the coordinator is gone for good.
    step = random.Random().randint(3, 12)
    job = R.Job(tmp, "crc", extra=["--epochs", "100", "--heartbeat-timeout", "3",
                                      "--coordinator-grace", "5"],
                holds=[("step", 1, step)])
    held = job.held(0)
    journal = job.dist + ".journal"
    corrupt_record(journal, 2)
    os.kill(coordinator_pid(job), signal.SIGKILL)
    os.kill(held, signal.SIGCONT)
    code, out = job.finish(timeout=120)
    refusals = [line for line in out.splitlines()
                if line.startswith("ddp-coordinator: cannot resume")]
    R.expect(len(refusals) == 1, f"want one refusal line, got {refusals}", out)
    R.expect("corrupt" in refusals[0] and os.path.basename(journal) in refusals[0],
             f"unclear: {refusals[0]}", out)
    print(f"refused: {refusals[0]}")
    R.expect(out.count("restarting it from its journal") == 1, "restarted more than once", out)
    R.expect("not restarting it again" in out, "the launcher did not say it gave up", out)
    R.expect(code in LOST_COORDINATOR_EXITS,
             f"job exited {code}, want one of {LOST_COORDINATOR_EXITS}", out)


def case_killed_during_recovery(tmp):
    """Rank 1 SIGKILLed at a random step, the coordinator SIGKILLed as soon as the job is
    RECOVERING: the restarted coordinator knows the last complete generation only, yet the
    replacement takes rank 1's place (its first Register may meet the dead process still
    holding the slot: it retries until the loss is known), and the run ends exit 0, bit for bit."""
    ref = R.reference()
    step = random.Random().randint(3, TOTAL_STEPS - 6)
    job = R.Job(tmp, "crr", holds=[("step", 1, step)])
    os.kill(job.held(0), signal.SIGKILL)
    job.wait_status(lambda s: s["state"] == "RECOVERING", every=0.02)
    os.kill(coordinator_pid(job), signal.SIGKILL)
    print(f"rank 1 killed after step {step}, the coordinator during the recovery")
    code, out = job.finish()
    R.expect(code == 0, f"job exited {code}, want 0", out)
    R.expect(out.count("restarting it from its journal (1 of 3)") == 1, "no restart logged", out)
    R.same_model(os.path.join(tmp, "ck", "final.pt"), ref)


def case_killed_during_second_recovery(tmp):
    """Rank 0 SIGKILLed and replaced (generation 1); later rank 2 SIGKILLed and the coordinator
    SIGKILLed as soon as the job is RECOVERING again. The old coordinator had announced
    generation 2 to the survivors; the restarted one knows generation 1 only and forms the next
    one again. Every survivor, the replacement rank 0 among them, must take part in it: the run
    ends exit 0, bit for bit, with one coordinator restart."""
    ref = R.reference()
    first = random.Random().randint(2, 6)
    second = random.Random().randint(first + 4, TOTAL_STEPS - 6)
    job = R.Job(tmp, "cr2", holds=[("step", 0, first), ("step", 2, second)])
    os.kill(job.held(0), signal.SIGKILL)
    job.wait_status(lambda s: s["state"] == "RUNNING" and s.get("membership_generation", 0) >= 1,
                    every=0.02)
    os.kill(job.held(1), signal.SIGKILL)
    job.wait_status(lambda s: s["state"] == "RECOVERING", every=0.02)
    os.kill(coordinator_pid(job), signal.SIGKILL)
    print(f"rank 0 killed after step {first}; rank 2 after step {second}, the coordinator during "
          "the second recovery")
    code, out = job.finish()
    R.expect(code == 0, f"job exited {code}, want 0", out)
    R.expect(out.count("restarting it from its journal (1 of 3)") == 1, "no restart logged", out)
    R.same_model(os.path.join(tmp, "ck", "final.pt"), ref)


def case_finished_ranks_kept(tmp):
    """3 workers; rank 0 frozen before its final checkpoint while ranks 1 and 2 are done; the
    coordinator SIGKILLed then. The restarted one must know from its journal that ranks 1 and 2
    are done (they never call again), so the job SUCCEEDS once rank 0 is done."""
    # The hold freezes rank 0's heartbeats too: a timeout longer than the test. No in-job
    # recovery: with it, every rank waits for rank 0's last checkpoint before it reports done
    # (training_loop.cc), and ranks 1 and 2 could not be done while rank 0 is held before it.
    extra = ["--nprocs-per-node", "3", "--heartbeat-timeout", "60", "--max-restarts", "0"]
    # 512 samples over 3 ranks: 171 each (padded), batches of 16: 11 steps per epoch.
    total = 3 * -(-(-(-512 // 3)) // 16)
    ref = R.reference(extra)
    job = R.Job(tmp, "crf", extra=extra, holds=[("checkpoint", 0, total)])
    held = job.held(0)
    job.wait_status(lambda s: [r["state"] for r in s["ranks"] if r["rank"] in (1, 2)] ==
                    ["done", "done"])
    victim = coordinator_pid(job)
    os.kill(victim, signal.SIGKILL)
    # The restarted coordinator answers before rank 0 goes on: it must show 1 and 2 done.
    deadline = time.time() + 30
    restored = None
    while time.time() < deadline and job.p.poll() is None:
        s = job.status() if incarnation(job.dist) >= 1 else None
        if s is not None:
            restored = s
            break
        time.sleep(0.05)
    os.kill(held, signal.SIGCONT)
    code, out = job.finish()
    R.expect(restored is not None, "the restarted coordinator never answered", out)
    states = {r["rank"]: r["state"] for r in restored["ranks"]}
    R.expect(states.get(1) == "done" and states.get(2) == "done",
             f"after the restart ranks 1 and 2 read {states.get(1)}, {states.get(2)}", out)
    R.expect(code == 0, f"job exited {code}, want 0", out)
    with open(job.dist + ".result") as f:
        result = f.read()
    R.expect("state=SUCCEEDED" in result.splitlines(), f"result file: {result}", out)
    log = job.coordinator_log()
    R.expect("job SUCCEEDED" in log and "lost" not in log.split("restored from the journal")[-1],
             "the restarted coordinator did not see the job succeed", log)
    R.same_model(os.path.join(tmp, "ck", "final.pt"), ref)
    print("ranks 1, 2 done before the SIGKILL and after the restart; job SUCCEEDED")


def case_killed_while_lingering_after_a_failure(tmp):
    """2 nodes (a faked Slurm step), --max-restarts 0. Node 0's ranks 0 and 1 and node 1's rank 2
    are frozen after a random step; rank 2 is SIGKILLed, so the job FAILS, and the coordinator,
    lingering to tell the frozen ranks, is SIGKILLed at once (chaos defect 13,
    docs/bench-chaos.md). Its journal records the failure and stays until the result is written:
    node 0's task restarts it from the journal, it fails the job again with the recorded cause,
    the ranks let go are told at their next heartbeat, and task 0 ends with the failure's code
    (4) well within a minute. Before, the journal was removed when the job ended: the restart
    found none ("cannot resume"), and the ranks waited for a coordinator that never came back."""
    at = random.Random().randint(3, TOTAL_STEPS - 6)
    step = S.SlurmStep(tmp, "6161", 2, ["--max-restarts", "0", "--heartbeat-timeout", "30",
                                        "--coordinator-restarts", "3"],
                       holds=[("step", 0, at), ("step", 1, at), ("step", 2, at)])
    frozen = [step.held(0), step.held(1)]
    victim = step.held(2)
    os.kill(victim, signal.SIGKILL)
    S.wait_status(step, lambda s: s["state"] == "FAILED", 60, "the job failing")
    coordinator = coordinator_pid(types.SimpleNamespace(p=step.tasks[0]))
    os.kill(coordinator, signal.SIGKILL)
    killed_at = time.time()
    print(f"rank 2 killed after step {at}; the coordinator (pid {coordinator}) killed as it "
          "lingered after the failure")
    deadline = killed_at + 30
    while incarnation(step.dist) < 1 and time.time() < deadline:
        time.sleep(0.05)
    for pid in frozen:
        os.kill(pid, signal.SIGCONT)
    codes, outs = step.finish(timeout=120)
    took = time.time() - killed_at
    all_out = step.outputs()
    R.expect(codes[0] == 4, f"node 0's task exited {codes[0]}, want 4", all_out)
    R.expect(outs[0].count("restarting it from its journal (1 of 3)") == 1,
             "node 0's task did not restart the coordinator", all_out)
    R.expect("cannot resume" not in all_out, "the restart found no journal", all_out)
    log = step.coordinator_log()
    R.expect("restored from the journal: the job had failed: rank 2" in log,
             "the restarted coordinator did not restore the failure", log)
    with open(step.dist + ".result") as f:
        result = f.read()
    R.expect("state=FAILED" in result.splitlines(), f"result file: {result}", all_out)
    R.expect(not os.path.exists(step.dist + ".journal"), "the journal outlived the result")
    print(f"the job ended {took:.1f} s after the coordinator's SIGKILL")
    R.expect(took < 45, f"the job took {took:.1f} s after the coordinator's SIGKILL")


if __name__ == "__main__":
    R.run_case(globals(), "coordinator-restart")
