"""The driver of bench/standby.sh: KILLS runs of a faked 3-node step (2 nodes + a spare), each
with every process of node 0 SIGKILLed at a random step; the time from the kill to the first step
trained after it, read from rank 0's recovery line (its unix time is when that step was
committed). Every run must end bit for bit equal to the uninterrupted run."""
import os
import random
import re
import signal
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "trainer", "app"))
import recovery_e2e_test as R  # noqa: E402
import spare_e2e_test as S  # noqa: E402

KILLS = int(os.environ.get("KILLS", "10"))
SEED = int(os.environ.get("SEED", "1"))
FAILOVER = os.environ.get("FAILOVER", "3")
WORK = os.environ["WORK"]
FLAGS = ["--spare-nodes", "1", "--heartbeat-timeout", "5", "--failover-timeout", FAILOVER,
         "--coordinator-grace", "30"]


def one(i, step_at, ref):
    tmp = os.path.join(WORK, f"run{i}")
    os.makedirs(tmp)
    step = S.SlurmStep(tmp, f"{7000 + i}", 3, FLAGS, holds=[("step", 0, step_at)])
    step.held(0)
    killed = time.time()
    os.killpg(step.tasks[0].pid, signal.SIGKILL)
    codes, outs = step.finish()
    if codes[1:] != [0, 0]:
        sys.exit(f"run {i}: task exit codes {codes}\n" + step.outputs()[-4000:])
    R.same_model(os.path.join(tmp, "ck", "final.pt"), ref)
    m = re.search(r"\[rank 0\] recovery 1: .*training resumed at step (\d+), .*\(unix time "
                  r"([\d.]+)\)", outs[2])
    if not m:
        sys.exit(f"run {i}: no recovery line from the new rank 0\n" + outs[2][-3000:])
    took = re.search(r"took over ([\d.]+) s after the last answer",
                     open(f"{step.dist}.coordinator.log.epoch1").read())
    started = re.search(r"started coordinator epoch 1 \(pid \d+, unix time ([\d.]+)\)", outs[1])
    if os.environ.get("VERBOSE"):
        print(f"  decided {float(started.group(1)) - killed:.2f} s after the kill")
        print("\n".join("  " + l for l in outs[1].splitlines() if "standby" in l))
    return float(m.group(2)) - killed, float(took.group(1)) if took else float("nan")


# The standby's cost on a job without faults: the same faked 2-node step (2 x 2 CPU workers, the
# MLP on 65,536 samples, 1 epoch = 4,096 steps, no evaluation) with --standby auto and off, in
# alternation; rank 0's own steps/s ("done: ... samples/s") over the whole run.
OVERHEAD_PAIRS = int(os.environ.get("OVERHEAD_PAIRS", "3"))
OVERHEAD_RUN = ["--data", "synthetic:65536x1x8x8:10", "--epochs", "1", "--print-freq", "100000",
                "--checkpoint-every", "100000"]


def throughput(i, standby):
    tmp = os.path.join(WORK, f"overhead{i}-{standby}")
    os.makedirs(tmp)
    step = S.SlurmStep(tmp, f"{8000 + i}{0 if standby == 'off' else 1}", 2,
                       OVERHEAD_RUN + ["--standby", standby], switches=["--no-eval"])
    codes, outs = step.finish(timeout=600)
    if codes != [0, 0]:
        sys.exit(f"overhead run {i} ({standby}): exit codes {codes}\n" + step.outputs()[-3000:])
    m = re.search(r"\[rank 0\] done: .* ([\d.]+) samples/s", outs[0])
    return float(m.group(1))


def overhead():
    rates = {"auto": [], "off": []}
    for i in range(OVERHEAD_PAIRS):
        for standby in (("auto", "off") if i % 2 == 0 else ("off", "auto")):
            rates[standby].append(throughput(i, standby))
            print(f"overhead pair {i + 1}: --standby {standby}: {rates[standby][-1]:.0f} samples/s",
                  flush=True)
    auto, off = statistics.median(rates["auto"]), statistics.median(rates["off"])
    print(f"standby overhead: median {auto:.0f} samples/s with --standby auto, {off:.0f} with off "
          f"(auto/off {auto / off:.3f}) over {OVERHEAD_PAIRS} interleaved pairs")


def main():
    if OVERHEAD_PAIRS > 0:
        overhead()
    if KILLS == 0:
        return
    ref = R.reference()
    rng = random.Random(SEED)
    seconds = []
    for i in range(KILLS):
        at = rng.randint(4, 18)
        s, took = one(i, at, ref)
        seconds.append(s)
        print(f"kill {i + 1}: node 0 SIGKILLed after step {at}; coordinator epoch 1 took over "
              f"{took:.1f} s after the last answer; first step after the kill {s:.2f} s later; "
              f"final.pt bit for bit", flush=True)
    print(f"{KILLS} kills of node 0 (--failover-timeout {FAILOVER}): kill -> first step median "
          f"{statistics.median(seconds):.2f} s, max {max(seconds):.2f} s "
          f"(target: median <= 5 s, max <= 10 s); load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
