"""End-to-end tests of inputs that claim more than they are and of checkpoint folders that belong
to one user and one job, with the real ddp-trainer in local mode (Gloo on loopback).

Run as `python bounded_inputs_e2e_test.py CASE` (CTest registers one test per case):
  symlink_loop      an image folder with two symlink loops (which hung a job for more than 90 s):
                    the job ends within 60 s with exit 2, naming the link.
  dev_zero          /dev/zero linked as zero.jpg (read for 66 s until std::bad_alloc, with an
                    error that did not name it): exit 2 within 60 s, naming the file.
  planted_checkpoint  a checkpoint folder or checkpoint that group or others may write is
                    refused (exit 2, one line naming it and what is wrong); after chmod go-w the
                    run resumes.
  shared_folder     a second job pointed at the checkpoint folder of a running job is refused
                    (exit 2, naming the job and run that hold it) and neither adopts nor prunes its
                    run; the first job's checkpoints are intact; a relaunch of the first job
                    resumes its run.
Needs DDP_BIN_DIR (the built binaries) and Pillow in the test's Python (as bench/data does).
"""
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from trainer_e2e_test import EXIT, FAST, NO_LINGER, TRAINER, clean_env, expect  # noqa: E402

SKIP = 77  # CTest: SKIP_RETURN_CODE
ONE = FAST + ["--nprocs-per-node", "1"]


def run(args, cwd, timeout):
    """Runs ddp-trainer; returns (exit code, output, seconds). A run past `timeout` is killed
    (its whole session) and fails the test."""
    start = time.time()
    p = subprocess.Popen([TRAINER] + NO_LINGER + args, cwd=cwd, env=clean_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        sys.exit(f"FAIL: ddp-trainer {' '.join(args)} still running after {timeout} s\n"
                 f"{out[-6000:]}")
    return p.returncode, out, time.time() - start


def make_imagefolder(root, train=8, val=4, size=(40, 32)):
    """root/{train,val}/classN/imgNNN.jpg: `train` and `val` JPEGs of `size`, two classes (the
    straggler test shares it). Exits SKIP without Pillow."""
    try:
        from PIL import Image
    except ImportError:
        print("SKIP: this Python has no Pillow to write the test JPEGs", flush=True)
        sys.exit(SKIP)
    for split, count in (("train", train), ("val", val)):
        for i in range(count):
            folder = os.path.join(root, split, f"class{i % 2}")
            os.makedirs(folder, exist_ok=True)
            shade = (i * 37) % 256
            Image.new("RGB", size, (shade, 255 - shade, 90)).save(
                os.path.join(folder, f"img{i:03d}.jpg"), quality=90)


IMAGES = ["--data", "imagefolder:data", "--arch", "resnet18", "--batch-size", "2",
          "--workers", "0", "--nprocs-per-node", "1", "--backend", "gloo", "--device", "cpu",
          "--epochs", "1", "--no-eval", "--print-freq", "1", "--heartbeat-timeout", "5"]


def error_lines(out):
    return [line for line in out.splitlines() if "error:" in line]


def case_symlink_loop(tmp):
    make_imagefolder(os.path.join(tmp, "data"))
    os.symlink("..", os.path.join(tmp, "data", "train", "class0", "up"))
    os.symlink("..", os.path.join(tmp, "data", "train", "class1", "up"))
    code, out, took = run(IMAGES + ["--job-id", "loop"], tmp, timeout=120)
    expect(code == EXIT["DDP_EXIT_USAGE"], f"exited {code} after {took:.0f} s, want usage (2)", out)
    expect(took < 60, f"took {took:.0f} s", out)
    link = os.path.join("data", "train", "class0", "up")
    expect(any(f"{link}: leads back to data/train (a symlink loop" in line
               for line in error_lines(out)), "no one-line error naming the link", out)


def case_dev_zero(tmp):
    make_imagefolder(os.path.join(tmp, "data"))
    os.symlink("/dev/zero", os.path.join(tmp, "data", "train", "class0", "zero.jpg"))
    code, out, took = run(IMAGES + ["--job-id", "zero"], tmp, timeout=120)
    expect(code == EXIT["DDP_EXIT_USAGE"], f"exited {code} after {took:.0f} s, want usage (2)", out)
    expect(took < 60, f"took {took:.0f} s", out)
    name = os.path.join("data", "train", "class0", "zero.jpg")
    expect(any(f"{name}: is a character device, expected a regular file" in line
               for line in error_lines(out)), "no one-line error naming the file", out)


def case_planted_checkpoint(tmp):
    ck = os.path.join(tmp, "ck")
    code, out, _ = run(ONE + ["--epochs", "1", "--checkpoint-dir", "ck", "--stop-after-steps", "8",
                              "--job-id", "p1"], tmp, timeout=300)
    expect(code == EXIT["DDP_EXIT_RESUMABLE"], f"exited {code}, want resumable", out)
    saved = sorted(glob.glob(os.path.join(ck, "ckpt-*.pt")))
    expect(saved, "no checkpoint written", out)
    # A group member can write the folder: anything in it may be planted.
    os.chmod(ck, 0o775)
    code, out, _ = run(ONE + ["--epochs", "1", "--checkpoint-dir", "ck", "--job-id", "p2"], tmp,
                       timeout=300)
    expect(code == EXIT["DDP_EXIT_USAGE"], f"exited {code}, want usage (2)", out)
    expect(any("checkpoint folder ck is writable by its group (mode 0775): another user could "
               "have planted a checkpoint; refusing to load from it (chmod go-w ck)" in line
               for line in error_lines(out)), "no one-line error naming the folder", out)
    expect("resuming from" not in out, "a checkpoint was loaded", out)
    # A checkpoint file others may write, in a private folder.
    os.chmod(ck, 0o755)
    os.chmod(saved[-1], 0o666)
    code, out, _ = run(ONE + ["--epochs", "1", "--checkpoint-dir", "ck", "--job-id", "p3"], tmp,
                       timeout=300)
    expect(code == EXIT["DDP_EXIT_USAGE"], f"exited {code}, want usage (2)", out)
    expect(any(f"checkpoint {saved[-1][len(tmp) + 1:]} is writable by its group and others "
               "(mode 0666)" in line for line in error_lines(out)),
           "no one-line error naming the checkpoint", out)
    expect("resuming from" not in out, "a checkpoint was loaded", out)
    os.chmod(saved[-1], 0o644)
    code, out, _ = run(ONE + ["--epochs", "1", "--checkpoint-dir", "ck", "--job-id", "p4"], tmp,
                       timeout=300)
    expect(code == EXIT["DDP_EXIT_OK"] and "resuming from" in out,
           f"exited {code}: the trusted checkpoint was not resumed", out)


def case_shared_folder(tmp):
    ck = os.path.join(tmp, "ck")
    args = ONE + ["--epochs", "400", "--checkpoint-dir", "ck", "--job-id", "first"]
    log = open(os.path.join(tmp, "first.log"), "w+")
    first = subprocess.Popen([TRAINER] + NO_LINGER + args + ["--checkpoint-every", "4"], cwd=tmp,
                             env=clean_env(), stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)

    def first_output():
        log.flush()
        with open(log.name) as f:
            return f.read()
    try:
        deadline = time.time() + 120
        while time.time() < deadline and len(glob.glob(os.path.join(ck, "ckpt-*.pt"))) < 2:
            expect(first.poll() is None, f"the first job ended ({first.returncode})",
                   first_output())
            time.sleep(0.2)
        before = sorted(glob.glob(os.path.join(ck, "ckpt-*.pt")))
        expect(len(before) >= 2, "the first job wrote no checkpoints within 120 s")
        run_id = re.match(r"ckpt-([0-9a-f]{8})-", os.path.basename(before[0])).group(1)
        # The second job: --resume none would have started a run and pruned nothing of the
        # first's, --resume auto would have adopted it; both are refused.
        for resume in ("auto", "none"):
            code, out, took = run(ONE + ["--epochs", "1", "--checkpoint-dir", "ck", "--resume",
                                         resume, "--job-id", "second"], tmp, timeout=120)
            expect(code == EXIT["DDP_EXIT_USAGE"], f"--resume {resume}: exited {code}, want 2",
                   out)
            expect(any(f"checkpoint folder ck is in use by job first (run {run_id}, pid "
                       in line and "two jobs must not share a checkpoint folder" in line
                       for line in error_lines(out)),
                   "no one-line error naming the job and run that hold the folder", out)
            expect("resuming from" not in out and "starting run" not in out,
                   "the second job used the folder", out)
        expect(first.poll() is None, "the first job did not survive the second")
        now = sorted(glob.glob(os.path.join(ck, "ckpt-*.pt")))
        expect(all(os.path.basename(p).startswith(f"ckpt-{run_id}-") for p in now),
               f"another run's files appeared: {now}")
        with open(os.path.join(ck, "current-run")) as f:
            expect(f"run_id={run_id}" in f.read(), "the manifest changed hands")
    finally:
        os.killpg(first.pid, signal.SIGTERM)
        try:
            first.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    expect(first.returncode == EXIT["DDP_EXIT_RESUMABLE"],
           f"the first job exited {first.returncode} on SIGTERM, want resumable", first_output())
    # The same job again (a requeue): it still resumes its run.
    code, out, _ = run(args + ["--stop-after-steps", "1"], tmp, timeout=300)
    expect(f"(run {run_id})" in out and "resuming from" in out,
           "the relaunched first job did not resume its run", out)
    # Once the first job is gone, another job may use the folder.
    code, out, _ = run(ONE + ["--epochs", "1", "--checkpoint-dir", "ck", "--resume", "none",
                              "--job-id", "third"], tmp, timeout=300)
    expect(code == EXIT["DDP_EXIT_OK"], f"a later job exited {code}", out)


CASES = {n[len("case_"):]: f for n, f in globals().items() if n.startswith("case_")}

if __name__ == "__main__":
    name = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix=f"ddp-bounded-e2e-{name}-")
    try:
        CASES[name](tmp)
        print(f"PASS {name}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
