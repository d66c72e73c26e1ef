"""End-to-end tests of ddp-trainer: real processes, real coordinator, Gloo on loopback.

Run as `python trainer_e2e_test.py CASE` (CTest registers one test per case). Needs
DDP_BIN_DIR (the built binaries) and Python torch (for reading checkpoints and the reference run).
"""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import torch
import torch.jit._pickle  # noqa: F401  (restore_type_tag, see model_state)

BIN = os.environ["DDP_BIN_DIR"]
TRAINER = os.path.join(BIN, "ddp-trainer")
# A finished job ends at once: no test reads a job\'s status after it succeeded.
NO_LINGER = ["--linger", "0"]
DDPCTL = os.path.join(BIN, "ddpctl")
SRC = os.environ.get("DDP_SOURCE_DIR", os.path.dirname(__file__) + "/../../..")


def exit_codes():
    """The exit codes of every binary, by name, as `ddpctl exit-codes` prints them
    (common/exit_codes.h): no test writes one as a number."""
    out = subprocess.run([DDPCTL, "exit-codes"], stdout=subprocess.PIPE, text=True,
                         check=True).stdout
    return {k: int(v) for k, v in (line.split("=", 1) for line in out.split())}


EXIT = exit_codes()
OK, RESUMABLE, USAGE = EXIT["DDP_EXIT_OK"], EXIT["DDP_EXIT_RESUMABLE"], EXIT["DDP_EXIT_USAGE"]
FAST = ["--data", "synthetic:512x1x8x8:10", "--arch", "mlp", "--batch-size", "16",
        "--workers", "0", "--print-freq", "5", "--heartbeat-timeout", "5"]


MALLOC_ENV = ("GLIBC_TUNABLES", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def clean_env():
    """The test's environment without Slurm variables (local mode) or malloc tunables (the
    workers' own host memory policy applies)."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith("SLURM") and k not in MALLOC_ENV}


def run(args, cwd, env=None, timeout=300, check=None):
    p = subprocess.run([TRAINER] + NO_LINGER + args, cwd=cwd, env=env or clean_env(), timeout=timeout,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if check is not None and p.returncode != check:
        sys.exit(f"FAIL: ddp-trainer {' '.join(args)} exited {p.returncode}, want {check}:\n"
                 f"{p.stdout[-6000:]}")
    return p


def expect(cond, msg, output=""):
    if not cond:
        sys.exit(f"FAIL: {msg}\n{output[-6000:]}")


def poll_status(dist, until, timeout=120, every=0.5):
    """Polls `ddpctl status --json` of the job at `dist` until `until(status)` returns something
    true, and returns that; None after `timeout` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        time.sleep(every)
        st = subprocess.run([DDPCTL, "status", "--json", "--dist-file", dist],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        if st.returncode == OK:
            found = until(json.loads(st.stdout))
            if found:
                return found
    return None


def model_state(path):
    # A plain dict of tensors and numbers; LibTorch's pickler tags typed containers with
    # torch.jit._pickle.restore_type_tag, which weights_only loading accepts once allowed.
    with torch.serialization.safe_globals([torch.jit._pickle.restore_type_tag]):
        ckpt = torch.load(path)
    expect(isinstance(ckpt, dict) and "model" in ckpt, f"{path} is not a checkpoint dict")
    return ckpt


def case_local4(tmp):
    """4 local workers train to completion; every rank registers once."""
    p = run(FAST + ["--nprocs-per-node", "4", "--epochs", "2", "--checkpoint-dir", "ck",
                    "--job-id", "e2e-local"], tmp, check=OK)
    out = p.stdout
    expect("[rank 0]" in out and "done: 2 epochs" in out, "no progress/summary from rank 0", out)
    expect("host malloc: blocks up to 32 MiB from the heap" in out,
           "rank 0 does not report the host memory policy", out)
    log = open(os.path.join(tmp, "dist_file.e2e-local.coordinator.log")).read()
    for r in range(4):
        expect(re.search(rf"rank {r} = node 0 local {r}\b", log),
               f"coordinator log does not assign rank {r}", log)
    ck = model_state(os.path.join(tmp, "ck", "final.pt"))
    expect(ck["epoch"] == 2 and ck["step"] == 2 * 8, f"final.pt epoch/step {ck['epoch']}/{ck['step']}")
    expect(not os.path.exists(os.path.join(tmp, "dist_file.e2e-local.tmp")), "temp dist file left")


def slurm_env(job, ntasks, procid, localid, nodeid, nnodes, per_node):
    env = clean_env()
    env.update({"SLURM_JOB_ID": job, "SLURM_STEP_NUM_TASKS": str(ntasks),
                "SLURM_PROCID": str(procid), "SLURM_LOCALID": str(localid),
                "SLURM_NODEID": str(nodeid), "SLURM_STEP_NUM_NODES": str(nnodes),
                "SLURM_STEP_TASKS_PER_NODE": per_node, "SLURM_RESTART_COUNT": "0"})
    return env


def case_slurm_faked(tmp):
    """One task per worker under a faked Slurm step, uneven layout (2 tasks + 1 task): ranks are
    numbered by (node, local rank)."""
    layout = [(0, 0, 0), (1, 1, 0), (2, 0, 1)]  # (procid, localid, nodeid)
    procs = []
    for procid, localid, nodeid in layout:
        env = slurm_env("4242", 3, procid, localid, nodeid, 2, "2,1")
        procs.append(subprocess.Popen([TRAINER] + NO_LINGER + FAST + ["--epochs", "1"], cwd=tmp, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=300)[0] for p in procs]
    for p, out in zip(procs, outs):
        expect(p.returncode == OK, f"task exited {p.returncode}", out)
    log = open(os.path.join(tmp, "dist_file.4242.coordinator.log")).read()
    # rank = order of (node, local rank): (0,0)->0, (0,1)->1, (1,0)->2
    for rank, node, local in [(0, 0, 0), (1, 0, 1), (2, 1, 0)]:
        expect(re.search(rf"rank {rank} = node {node} local {local}\b", log),
               f"rank {rank} is not node {node} local {local}", log)


def case_resume_exact(tmp):
    """2 epochs straight == 1.5 epochs, stop, resume (bitwise, CPU, world 2)."""
    common = FAST + ["--nprocs-per-node", "2", "--epochs", "2", "--seed", "7"]
    run(common + ["--checkpoint-dir", "straight", "--job-id", "straight"], tmp, check=OK)
    # 512 samples / 2 ranks / batch 16 = 16 steps per epoch; stop after 24 (1.5 epochs).
    p = run(common + ["--checkpoint-dir", "resumed", "--stop-after-steps", "24", "--job-id", "r1"],
            tmp, check=RESUMABLE)
    expect("stopped at step 24" in p.stdout, "no stop message", p.stdout)
    p = run(common + ["--checkpoint-dir", "resumed", "--job-id", "r2"], tmp, check=OK)
    expect("resuming from" in p.stdout, "second run did not resume", p.stdout)
    a = model_state(os.path.join(tmp, "straight", "final.pt"))
    b = model_state(os.path.join(tmp, "resumed", "final.pt"))
    expect(a["step"] == b["step"] == 32, f"steps {a['step']} {b['step']}")
    for k in a["model"]:
        expect(torch.equal(a["model"][k], b["model"][k]), f"{k} differs after resume")
    for k in a["optimizer"]["momentum_buffer"]:
        expect(torch.equal(a["optimizer"]["momentum_buffer"][k],
                           b["optimizer"]["momentum_buffer"][k]), f"momentum {k} differs")


def case_kill_worker(tmp):
    """--max-restarts 0 (fail fast): SIGKILL one worker mid-epoch: every process exits within
    30 s, non-zero, naming the rank. (With restarts the job recovers: recovery_e2e_test.py.)"""
    args = ["--data", "synthetic:100000x1x8x8:10", "--arch", "mlp", "--batch-size", "8",
            "--workers", "0", "--nprocs-per-node", "3", "--epochs", "50", "--heartbeat-timeout",
            "3", "--max-restarts", "0", "--job-id", "kill"]
    p = subprocess.Popen([TRAINER] + NO_LINGER + args, cwd=tmp, env=clean_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)

    def pick_victim(st):
        if st["state"] != "RUNNING" or not any(r["step"] >= 1 for r in st["ranks"]):
            return None
        # Find the worker processes: this launcher's children running --internal-worker (only
        # its own: other jobs on the machine run workers too).
        out = subprocess.run(["pgrep", "-P", str(p.pid), "-f", "--", "--internal-worker"],
                             stdout=subprocess.PIPE, text=True).stdout.split()
        workers = [int(x) for x in out if int(x) != p.pid]
        if len(workers) < 3:
            return None
        victim = sorted(workers)[1]
        return victim, {r["pid"]: r["rank"] for r in st["ranks"]}.get(victim)

    found = poll_status(os.path.join(tmp, "dist_file.kill"), pick_victim, every=1)
    expect(found is not None, "job never reached RUNNING with 3 workers")
    victim, victim_rank = found
    expect(victim_rank is not None, f"pid {victim} is not a rank in ddpctl status")
    os.kill(victim, signal.SIGKILL)
    t0 = time.time()
    try:
        out = p.communicate(timeout=30)[0]
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        sys.exit("FAIL: job still running 30 s after a worker was killed")
    elapsed = time.time() - t0
    expect(p.returncode != OK, "job exited OK after losing a worker", out)
    # The launcher tells the coordinator which worker died, so every report names that rank
    # (not the first peer whose allreduce saw the connection reset).
    named = re.compile(r"rank %d \(host [^,]+, node 0, local rank \d, pid %d\) killed by signal 9"
                       % (victim_rank, victim))
    expect(named.search(out), f"output does not name the lost rank {victim_rank} (pid {victim})", out)
    aborted = [l for l in out.splitlines() if re.match(r"\[rank \d+\] error:", l)]
    expect(all(named.search(l) for l in aborted), "a rank blamed someone else", "\n".join(aborted))
    # Nothing of this job is left: no process works in its folder (other jobs may run elsewhere).
    left = []
    for proc in glob.glob("/proc/[0-9]*"):
        try:
            if os.path.realpath(os.readlink(proc + "/cwd")) == os.path.realpath(tmp):
                left.append(proc[len("/proc/"):])
        except OSError:
            pass
    expect(not left, f"processes left running: {left}")
    print(f"job ended {elapsed:.1f} s after the kill")


def case_suspend(tmp):
    """The whole job is stopped for longer than the heartbeat timeout and continued (what Slurm's
    `scontrol suspend` / `resume` does to every process of a job): it finishes, exit 0, and the
    coordinator logs the time it was not running instead of losing every rank."""
    args = ["--data", "synthetic:60000x1x8x8:10", "--arch", "mlp", "--batch-size", "8",
            "--workers", "0", "--nprocs-per-node", "2", "--epochs", "1", "--no-eval",
            "--heartbeat-timeout", "3", "--print-freq", "500", "--job-id", "susp"]
    p = subprocess.Popen([TRAINER] + NO_LINGER + args, cwd=tmp, env=clean_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    dist = os.path.join(tmp, "dist_file.susp")
    step = poll_status(dist, lambda st: st["state"] == "RUNNING" and
                       min(r["step"] for r in st["ranks"]))
    if not step:
        os.killpg(p.pid, signal.SIGKILL)
        sys.exit("FAIL: job never reached step 1")
    os.killpg(p.pid, signal.SIGSTOP)  # launcher, coordinator and both workers
    time.sleep(8)
    os.killpg(p.pid, signal.SIGCONT)
    try:
        out = p.communicate(timeout=300)[0]
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        sys.exit("FAIL: job still running 300 s after it was continued")
    expect(p.returncode == OK, f"job exited {p.returncode} after a suspend", out)
    steps = re.search(r"done: 1 epochs, (\d+) steps", out)
    expect(steps and int(steps.group(1)) > step, "no final summary after the suspend", out)
    with open(dist + ".coordinator.log") as f:
        log = f.read()
    stall = re.search(r"coordinator was not running for ([0-9.]+)s", log)
    expect(stall and float(stall.group(1)) >= 7.5, "the coordinator did not log the suspend", log)
    expect("lost" not in log, "a rank was declared lost", log)
    print(f"suspended at step {step} for {stall.group(1)} s; finished {steps.group(1)} steps")


def case_bad_input(tmp):
    """Bad input: one-line errors, nothing started, nothing lost."""
    def fails(args, needle, code=None):
        p = run(args + ["--nprocs-per-node", "1", "--registration-timeout", "20"], tmp, timeout=120)
        expect(p.returncode != OK, f"{args} succeeded", p.stdout)
        if code is not None:
            expect(p.returncode == code, f"{args} exited {p.returncode}, want {code}", p.stdout)
        expect(needle in p.stdout, f"{args}: no '{needle}' in output", p.stdout)
    os.makedirs(os.path.join(tmp, "empty"))
    fails(["--data", "mnist:" + os.path.join(tmp, "empty")], "empty")
    corrupt = os.path.join(tmp, "corrupt")
    os.makedirs(corrupt)
    open(os.path.join(corrupt, "train-images-idx3-ubyte"), "wb").write(b"\x00\x00\x08\x03garbage")
    for name in ["train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]:
        open(os.path.join(corrupt, name), "wb").write(b"junk")
    fails(["--data", "mnist:" + os.path.join(tmp, "corrupt")], "corrupt/")
    no_arch = [a for i, a in enumerate(FAST) if a != "--arch" and FAST[i - 1] != "--arch"]
    fails(no_arch + ["--arch", "vgg99"], "vgg99", code=USAGE)
    open(os.path.join(tmp, "notamodule.pt"), "wb").write(b"this is not a TorchScript file")
    fails(FAST + ["--model", os.path.join(tmp, "notamodule.pt")], "notamodule.pt", code=USAGE)
    fails(FAST + ["--checkpoint-dir", "/etc/passwd/ck"], "checkpoint-dir", code=USAGE)
    fails(FAST + ["--epochs", "0"], "--epochs", code=USAGE)
    fails(FAST + ["--no-such-flag"], "no-such-flag", code=USAGE)
    fails(FAST + ["--fused-bn-relu", "--channels-last"], "--fused-bn-relu applies to --arch",
          code=USAGE)
    resnet = no_arch + ["--arch", "resnet18"]
    fails(resnet + ["--fused-bn-relu"], "--fused-bn-relu needs --channels-last", code=USAGE)
    fails(resnet + ["--fused-bn-relu", "--channels-last", "--device", "cpu"],
          "--fused-bn-relu runs on CUDA tensors", code=USAGE)
    # A corrupt newest checkpoint: the previous one is used, with a warning.
    run(FAST + ["--nprocs-per-node", "1", "--epochs", "1", "--checkpoint-dir", "ck",
                "--checkpoint-every", "8", "--job-id", "ck1"], tmp, check=OK)
    ckpts = sorted(glob.glob(os.path.join(tmp, "ck", "ckpt-*.pt")))
    expect(len(ckpts) >= 2, f"expected >= 2 checkpoints, got {ckpts}")
    open(ckpts[-1], "wb").write(b"truncated")
    # final.pt holds the same step as the newest checkpoint (and would be resumed from): without
    # it, the previous checkpoint is the newest that loads.
    os.unlink(os.path.join(tmp, "ck", "final.pt"))
    p = run(FAST + ["--nprocs-per-node", "1", "--epochs", "2", "--checkpoint-dir", "ck",
                    "--job-id", "ck2"], tmp, check=OK)
    previous = os.path.relpath(ckpts[-2], tmp)
    expect("skipping checkpoint" in p.stdout and "resuming from " + previous in p.stdout,
           "corrupt newest checkpoint not skipped", p.stdout)


def case_accuracy(tmp):
    """The demo's model and workers learn: >= 85% test accuracy on the real Fashion-MNIST after
    one epoch (the demo runs two; one epoch gives about 89.6%)."""
    p = run(["--nprocs-per-node", "4", "--data", "fashion-mnist", "--arch", "cnn", "--epochs", "1",
             "--print-freq", "100", "--job-id", "acc"], tmp, timeout=1500, check=OK)
    m = re.findall(r"test Acc@1 ([0-9.]+)", p.stdout)
    expect(m, "no test accuracy printed", p.stdout)
    acc = float(m[-1])
    print(f"test Acc@1 {acc:.2f}")
    expect(acc >= 85.0, f"test accuracy {acc} < 85", p.stdout)


def case_python_equivalence(tmp):
    """A TorchScript model trained by ddp-trainer --model (2 workers) ends within 1e-4 of
    PyTorch's Python DDP + DistributedSampler + DataLoader with the same seed and settings."""
    ref = os.path.join(SRC, "tests", "trainer", "app", "python_reference.py")
    subprocess.run([sys.executable, ref, "export", os.path.join(tmp, "model.pt")], check=True)
    args = ["--model", os.path.join(tmp, "model.pt"), "--data", "fashion-mnist", "--epochs", "1",
            "--batch-size", "32", "--lr", "0.05", "--momentum", "0.9", "--weight-decay", "0.0001",
            "--seed", "3", "--nprocs-per-node", "2", "--workers", "1", "--no-eval",
            "--schedule", "constant", "--checkpoint-dir", "ck", "--job-id", "eq",
            "--stop-after-steps", "300", "--print-freq", "100"]
    run(args, tmp, timeout=900, check=RESUMABLE)
    ours = model_state(sorted(glob.glob(os.path.join(tmp, "ck", "ckpt-*.pt")))[-1])["model"]
    subprocess.run([sys.executable, ref, "train", os.path.join(tmp, "model.pt"),
                    os.path.join(tmp, "python.pt"), "300"], check=True, timeout=900)
    theirs = torch.load(os.path.join(tmp, "python.pt"))
    worst = 0.0
    for k, v in theirs.items():
        expect(k in ours, f"{k} missing from our checkpoint")
        worst = max(worst, (ours[k].float() - v.float()).abs().max().item())
    print(f"max |ours - pytorch| = {worst:.3g}")
    expect(worst <= 1e-4, f"weights differ by {worst}")


def progress_columns(out):
    """{step: (loss, loss_avg, acc1, acc1_avg)} from rank 0's progress lines of epoch 0."""
    rows = {}
    pat = (r"Epoch: \[0\]\[\s*(\d+)/\d+\].*?Loss ([0-9.e+-]+) \(([0-9.e+-]+)\)\s+"
           r"Acc@1\s+([0-9.]+) \(\s*([0-9.]+)\)")
    for m in re.finditer(pat, out):
        rows[int(m.group(1))] = tuple(float(g) for g in m.groups()[1:])
    return rows


def case_progress_averages(tmp):
    """The (avg) columns average every step of the epoch, not only the printed ones: the same
    run printed every step and every 5th step shows the same averages, and each equals the mean
    of the per-step values up to it."""
    base = FAST[:-4] + ["--nprocs-per-node", "2", "--epochs", "1", "--no-eval",
                        "--heartbeat-timeout", "5"]
    every = progress_columns(run(base + ["--print-freq", "1", "--job-id", "avg1"], tmp,
                                 check=0).stdout)
    fifth = progress_columns(run(base + ["--print-freq", "5", "--job-id", "avg5"], tmp,
                                 check=0).stdout)
    expect(len(every) >= 10 and len(fifth) >= 3, f"too few progress lines: {every} {fifth}")
    for step, (_, loss_avg, _, acc_avg) in fifth.items():
        expect(step in every, f"step {step} printed with --print-freq 5 but not 1")
        want = every[step]
        expect(abs(loss_avg - want[1]) <= 1e-3 * abs(want[1]) and abs(acc_avg - want[3]) < 0.011,
               f"step {step}: averages differ with the print frequency: {fifth[step]} vs {want}")
        losses = [every[s][0] for s in range(step + 1)]
        accs = [every[s][2] for s in range(step + 1)]
        mean_loss, mean_acc = sum(losses) / len(losses), sum(accs) / len(accs)
        expect(abs(loss_avg - mean_loss) <= 2e-3 * abs(mean_loss) + 1e-4 and
               abs(acc_avg - mean_acc) < 0.02,
               f"step {step}: avg ({loss_avg}, {acc_avg}) is not the mean of every step so far "
               f"({mean_loss}, {mean_acc})")
    print(f"averages agree at steps {sorted(fifth)}")


CASES = {n[len("case_"):]: f for n, f in globals().items() if n.startswith("case_")}

if __name__ == "__main__":
    name = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix=f"ddp-e2e-{name}-")
    try:
        CASES[name](tmp)
        print(f"PASS {name}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
