"""End-to-end tests of stall detection and of a stop that always ends: real processes, Gloo on
loopback, an imagefolder data set of small generated JPEGs in which one training file is a FIFO
that nobody writes (what a hung network file system looks like to a reader).

Run as `python stall_e2e_test.py CASE` (CTest registers one test per case):
  stall_data  (--max-restarts 0) the rank that opens the FIFO shows as `stalled` in phase
              `data` in `ddpctl status --json` within 90 s of the hang, then the job fails with
              exit 4 naming that rank, within 3 minutes.
  stall_replaced  (--max-restarts 1) the stalled rank alone is told to exit and is replaced;
              the replacement hangs on the same FIFO with no restart left: exit 4 naming it.
  stop_hung   `ddpctl stop` of the hung job ends it within --stop-timeout + 30 s, naming the
              stuck rank: exit 3 when a checkpoint was committed before the hang, else 1.
  stall_replaced_exact  (--max-restarts 1) the stalled rank is replaced, and the FIFO is
              swapped for the real image before its replacement reads it: the job ends exit 0
              with a final.pt bitwise equal to the uninterrupted run's (ResNet-18: BatchNorm
              buffers; random crops and flips: the augmentation's random numbers).
Needs DDP_BIN_DIR (the built binaries) and Pillow in the test's Python (as bench/data does).
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

BIN = os.environ["DDP_BIN_DIR"]
TRAINER = os.path.join(BIN, "ddp-trainer")
# A finished job ends at once: no test reads a job\'s status after it succeeded.
NO_LINGER = ["--linger", "0"]
DDPCTL = os.path.join(BIN, "ddpctl")
SKIP = 77  # CTest's SKIP_RETURN_CODE for these tests

try:
    from PIL import Image
except ImportError:
    print("SKIP: this Python has no Pillow to write the test JPEGs", flush=True)
    sys.exit(SKIP)


def exit_codes():
    out = subprocess.run([DDPCTL, "exit-codes"], stdout=subprocess.PIPE, text=True,
                         check=True).stdout
    return {k: int(v) for k, v in (line.split("=", 1) for line in out.split())}


EXIT = exit_codes()


def fail(msg, output=""):
    sys.exit(f"FAIL: {msg}\n{output[-8000:]}")


def make_imagefolder(root, fifo=True):
    """root/{train,val}/classN/imgNN.jpg: 16 train and 4 val images of 48x40, two classes; with
    `fifo`, the 7th train image (class 0, img06) is replaced by a FIFO. Returns that image's
    path."""
    for split, count in (("train", 16), ("val", 4)):
        for i in range(count):
            folder = os.path.join(root, split, f"class{i % 2}")
            os.makedirs(folder, exist_ok=True)
            shade = (i * 37) % 256
            Image.new("RGB", (48, 40), (shade, 255 - shade, (shade * 3) % 256)).save(
                os.path.join(folder, f"img{i:02d}.jpg"), quality=90)
    path = os.path.join(root, "train", "class0", "img06.jpg")
    if fifo:
        os.remove(path)
        os.mkfifo(path)
    return path


def status(dist):
    st = subprocess.run([DDPCTL, "status", "--json", "--dist-file", dist],
                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=30)
    return json.loads(st.stdout) if st.returncode == EXIT["DDP_EXIT_OK"] else None


def wait_for(dist, until, timeout, proc):
    """Polls status until `until(status)` is true; returns (status, seconds waited)."""
    start = time.time()
    while time.time() - start < timeout:
        if proc.poll() is not None:
            fail(f"ddp-trainer exited {proc.returncode} early", proc.communicate()[0])
        s = status(os.path.join(dist))
        if s is not None and until(s):
            return s, time.time() - start
        time.sleep(0.5)
    return None, time.time() - start


def blocked_on_fifo(pid):
    """True when a thread of `pid` waits for a FIFO's writer (kernel wait channel), None when
    the wait channels cannot be read here."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    seen = False
    for t in tasks:
        try:
            wchan = open(f"/proc/{pid}/task/{t}/wchan").read().strip()
        except OSError:
            continue
        if wchan not in ("", "0"):
            seen = True
        if "wait_for_partner" in wchan or "fifo" in wchan:
            return True
    return False if seen else None


def start_job(tmp, extra, fifo=True):
    data = os.path.join(tmp, "data")
    make_imagefolder(data, fifo)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    # The data path is relative (the job runs in `tmp`), so that runs in two folders have the
    # same flags.
    args = [TRAINER, *NO_LINGER, "--data", "imagefolder:data", "--arch", "resnet18", "--batch-size", "2",
            "--workers", "0", "--nprocs-per-node", "2", "--backend", "gloo", "--device", "cpu",
            "--epochs", "2", "--no-eval", "--print-freq", "1", "--heartbeat-timeout", "5",
            "--pg-timeout", "600", "--job-id", "stall", "--checkpoint-dir", "ck",
            "--checkpoint-every", "1"] + extra
    proc = subprocess.Popen(args, cwd=tmp, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    return proc, os.path.join(tmp, "dist_file.stall")


def the_hang(s):
    """The ranks once one sits in data while the other waits in allreduce, else None."""
    ranks = {r["rank"]: r for r in s.get("ranks", [])}
    data = [r for r in ranks.values() if r.get("phase") == "data" and r["phase_seconds"] >= 2]
    waiting = [r for r in ranks.values() if r.get("phase") == "allreduce"]
    return (data[0], waiting[0]) if len(data) == 1 and waiting else None


def finish(proc, timeout):
    try:
        out, _ = proc.communicate(timeout=timeout)
        return out
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        fail(f"ddp-trainer did not end within {timeout:.0f}s", proc.communicate()[0])
        return ""


def check_hung_rank(hung):
    on_fifo = blocked_on_fifo(hung["pid"])
    if on_fifo is None:
        print("note: kernel wait channels unreadable; the hung rank is known by its phase only")
    elif not on_fifo:
        fail(f"rank {hung['rank']} (pid {hung['pid']}) in phase data is not blocked on the FIFO")


def case_stall_data(tmp):
    # Without restarts (fail fast): a stall with a restart left replaces the rank instead.
    proc, dist = start_job(tmp, ["--stall-timeout", "4", "--max-restarts", "0"])
    s, _ = wait_for(dist, the_hang, 240, proc)
    if s is None:
        fail("no rank ever sat in data while its peer waited in allreduce", finish(proc, 30))
    hung, _ = the_hang(s)
    hang_start = time.time() - hung["phase_seconds"]
    check_hung_rank(hung)
    s, _ = wait_for(dist, lambda st: st.get("stall") is not None, 90, proc)
    seen_after = time.time() - hang_start
    if s is None:
        fail("no stall in ddpctl status within 90 s of the hang", finish(proc, 30))
    stall = s["stall"]
    if stall["rank"] != hung["rank"] or stall["phase"] != "data":
        fail(f"stall names rank {stall['rank']} in {stall['phase']}, want rank {hung['rank']} in "
             f"data: {json.dumps(s)}")
    row = [r for r in s["ranks"] if r["rank"] == hung["rank"]][0]
    if row["state"] not in ("stalled", "failed"):
        fail(f"rank {hung['rank']} reads {row['state']}, want stalled: {json.dumps(s)}")
    if stall["peers"].get("allreduce", 0) != 1:
        fail(f"stall peers {stall['peers']}, want 1 in allreduce")
    print(f"stalled rank {stall['rank']} in data seen {seen_after:.1f}s after the hang began")
    text = subprocess.run([DDPCTL, "status", "--dist-file", dist], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=30).stdout
    if not text.startswith(f"STALLED: rank {hung['rank']} in data"):
        fail(f"ddpctl status does not lead with the stalled rank {hung['rank']}", text)
    out = finish(proc, 180 - (time.time() - hang_start))
    ended = time.time() - hang_start
    if proc.returncode != EXIT["DDP_EXIT_ABORTED"]:
        fail(f"ddp-trainer exited {proc.returncode}, want {EXIT['DDP_EXIT_ABORTED']}", out)
    needle = f"rank {hung['rank']} (host"
    if needle not in out or "stalled in data" not in out:
        fail(f"the output does not name {needle} ... stalled in data", out)
    print(f"job ended exit {proc.returncode} {ended:.1f}s after the hang began")


def case_stall_replaced(tmp):
    """--max-restarts 1: the stalled rank alone is told to exit and is replaced; its replacement
    reads the same FIFO, stalls again with no restart left, and the job fails naming it."""
    proc, dist = start_job(tmp, ["--stall-timeout", "4", "--max-restarts", "1"])
    out = finish(proc, 360)
    if proc.returncode != EXIT["DDP_EXIT_ABORTED"]:
        fail(f"ddp-trainer exited {proc.returncode}, want {EXIT['DDP_EXIT_ABORTED']}", out)
    told = [l for l in out.splitlines() if "exiting (code 1)" in l and "told to exit" in l]
    if len(told) != 1:
        fail(f"want one stalled worker told to exit, saw {len(told)}", out)
    if "restart 1 of 1" not in out and "restarts 1 of 1" not in out:
        fail("the output does not show the one restart used", out)
    if "stalled in data" not in out or "restarts exhausted" in told[0]:
        fail("the job's failure does not name the stalled rank", out)
    print(f"stalled worker replaced once, then the job failed: {told[0].strip()}")


def case_stall_replaced_exact(tmp):
    import torch
    ref_dir, run_dir = os.path.join(tmp, "ref"), os.path.join(tmp, "run")
    os.makedirs(ref_dir)
    os.makedirs(run_dir)
    flags = ["--stall-timeout", "4", "--max-restarts", "1"]
    proc, _ = start_job(ref_dir, flags, fifo=False)
    out = finish(proc, 300)
    if proc.returncode != EXIT["DDP_EXIT_OK"]:
        fail(f"the uninterrupted run exited {proc.returncode}", out)
    fifo = os.path.join(run_dir, "data", "train", "class0", "img06.jpg")
    proc, dist = start_job(run_dir, flags)
    log, deadline = dist + ".coordinator.log", time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if os.path.exists(log) and "told to exit (stalled)" in open(log).read():
            break
        time.sleep(0.05)
    else:
        fail("no rank was told to exit for a stall", finish(proc, 30))
    # The image, as the uninterrupted run read it, now where the FIFO was (an atomic rename:
    # the stalled reader keeps the FIFO; its replacement opens the file).
    real = os.path.join(ref_dir, "data", "train", "class0", "img06.jpg")
    swap = fifo + ".new"
    with open(real, "rb") as src, open(swap, "wb") as dst:
        dst.write(src.read())
    os.replace(swap, fifo)
    out = finish(proc, 300)
    if proc.returncode != EXIT["DDP_EXIT_OK"]:
        fail(f"ddp-trainer exited {proc.returncode}, want 0", out)
    if "restart 1 of 1" not in open(log).read():
        fail("the coordinator log shows no restart", open(log).read())
    load = lambda d: torch.load(os.path.join(d, "ck", "final.pt"), weights_only=False)
    a, b = load(ref_dir), load(run_dir)
    for k in a["model"]:
        if not torch.equal(a["model"][k], b["model"][k]):
            fail(f"final.pt differs from the uninterrupted run's at {k}", out)
    for k in a["optimizer"]["momentum_buffer"]:
        if not torch.equal(a["optimizer"]["momentum_buffer"][k],
                           b["optimizer"]["momentum_buffer"][k]):
            fail(f"momentum {k} differs from the uninterrupted run's", out)
    buffers = [k for k in a["model"] if "running_" in k or "num_batches" in k]
    print(f"stalled rank replaced; final.pt bitwise equal ({len(a['model'])} tensors, "
          f"{len(buffers)} BatchNorm buffers)")


def case_stop_hung(tmp):
    stop_timeout = 15
    proc, dist = start_job(tmp, ["--stall-timeout", "600", "--stop-timeout", str(stop_timeout)])
    s, _ = wait_for(dist, the_hang, 240, proc)
    if s is None:
        fail("no rank ever sat in data while its peer waited in allreduce", finish(proc, 30))
    hung, _ = the_hang(s)
    check_hung_rank(hung)
    checkpointed = s.get("checkpoint") is not None
    stop_at = time.time()
    st = subprocess.run([DDPCTL, "stop", "--dist-file", dist], stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, text=True, timeout=60)
    if st.returncode != EXIT["DDP_EXIT_OK"]:
        fail(f"ddpctl stop exited {st.returncode}", st.stdout)
    out = finish(proc, stop_timeout + 30 - (time.time() - stop_at))
    took = time.time() - stop_at
    want = EXIT["DDP_EXIT_RESUMABLE"] if checkpointed else EXIT["DDP_EXIT_FAILED"]
    if proc.returncode != want:
        fail(f"ddp-trainer exited {proc.returncode}, want {want} (checkpoint before the hang: "
             f"{checkpointed})", out)
    needle = f"rank {hung['rank']} (host"
    if needle not in out or "stuck in data" not in out:
        fail(f"the output does not name {needle} ... stuck in data", out)
    print(f"stop ended exit {proc.returncode} {took:.1f}s after ddpctl stop "
          f"(--stop-timeout {stop_timeout}s; checkpoint before the hang: {checkpointed})")


def main():
    case = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="ddp-stall-") as tmp:
        {"stall_data": case_stall_data, "stall_replaced": case_stall_replaced,
         "stall_replaced_exact": case_stall_replaced_exact, "stop_hung": case_stop_hung}[case](tmp)
    print(f"PASS {case}")


if __name__ == "__main__":
    main()
