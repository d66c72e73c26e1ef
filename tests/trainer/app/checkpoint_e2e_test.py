"""End-to-end tests of checkpoints that belong to a run, with the real ddp-trainer in local mode.

Run as `python checkpoint_e2e_test.py CASE` (CTest registers one test per case); shares the
helpers of trainer_e2e_test.py. Each case reproduces what failed before run identities,
checksums and the full-disk policy existed:
  prune_runs       a --resume none run in a folder of an earlier, longer run kept its own files
  relaunch         a finished run relaunched in place exits 0 and says it is complete
  flipped_byte     a flipped byte in the newest checkpoint is caught by the payload checksum
  umask            every file honours umask 077
  dead_temp        a writer killed mid-checkpoint leaves a temp file that the next start removes
  mismatch         resuming with another --seed or data set size is refused unless forced
  full_disk        a real full tmpfs: warning on a periodic checkpoint, exit 3 or 1 on the stop
"""
import glob
import os
import re
import resource
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from trainer_e2e_test import FAST, NO_LINGER, TRAINER, clean_env, expect, model_state, run  # noqa: E402

SKIP = 77  # CTest: SKIP_RETURN_CODE
ONE = FAST + ["--nprocs-per-node", "1"]


def ckpts(folder, run_id=None):
    pattern = f"ckpt-{run_id}-*.pt" if run_id else "ckpt-*.pt"
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(folder, pattern)))


def run_id_of(out):
    m = re.search(r"(?:starting |resuming from \S+ \()run ([0-9a-f]{8})", out)
    expect(m, "no run id printed", out)
    return m.group(1)


def payload_crc(ck):
    """payload_crc32 as trainer/checkpoint/checkpoint.h documents it, computed from what torch.load
    returns: proves the documented stream and the file agree."""
    crc = 0

    def add(b):
        nonlocal crc
        crc = zlib.crc32(b, crc)

    def tensor(name, t):
        add(name.encode() + b"\0")
        add(struct.pack("<q", t.dim()))
        for d in t.shape:
            add(struct.pack("<q", d))
        add(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())

    for name, t in ck["model"].items():
        tensor(name, t)
    for name, t in ck["optimizer"]["momentum_buffer"].items():
        tensor(name, t)
    tensor("rng", ck["rng"])
    add(ck["run_id"].encode() + b"\0")
    add(ck["schedule"]["name"].encode() + b"\0")
    s = ck["sampler"]
    for v in (ck["epoch"], ck["step"], s["consumed"], s["world_size"], s["seed"], s["dataset_size"]):
        add(struct.pack("<q", v))
    o = ck["optimizer"]
    for v in (o["lr"], ck["schedule"]["base_lr"], o["momentum"], o["weight_decay"]):
        add(struct.pack("<d", v))
    add(bytes([1 if o["nesterov"] else 0]))
    return crc


def case_prune_runs(tmp):
    """The issue's repro: an earlier, longer run left ckpt-56/60/64 and final.pt; a
    `--resume none --epochs 1` run saved ckpt-32, pruned it at once and failed at the end
    ("cannot be opened", exit 1). Now it prunes only its own files and owns final.pt."""
    p = run(ONE + ["--epochs", "2", "--checkpoint-dir", "ck", "--checkpoint-every", "4",
                   "--job-id", "old"], tmp, check=0)
    old = run_id_of(p.stdout)
    old_files = ckpts(os.path.join(tmp, "ck"), old)
    expect(old_files == [f"ckpt-{old}-00000000{s}.pt" for s in (56, 60, 64)],
           f"old run kept {old_files}")
    p = run(ONE + ["--epochs", "1", "--checkpoint-dir", "ck", "--checkpoint-every", "4",
                   "--resume", "none", "--job-id", "new"], tmp, check=0)
    new = run_id_of(p.stdout)
    expect(new != old, "a --resume none run reused the old run id", p.stdout)
    expect(ckpts(os.path.join(tmp, "ck"), old) == old_files, "the new run touched the old run's files")
    mine = ckpts(os.path.join(tmp, "ck"), new)
    expect(mine == [f"ckpt-{new}-00000000{s}.pt" for s in (24, 28, 32)], f"new run kept {mine}")
    final = model_state(os.path.join(tmp, "ck", "final.pt"))
    expect(final["run_id"] == new and final["step"] == 32 and final["epoch"] == 1,
           f"final.pt is run {final['run_id']} step {final['step']}")
    with open(os.path.join(tmp, "ck", "current-run")) as f:
        expect(f"run_id={new}\n" in f.read(), "the manifest does not name the new run")


def case_relaunch(tmp):
    """A finished run relaunched in place (the same command, --resume auto; or a requeue landing
    after the last epoch) exits 0 and says it is complete, instead of failing with
    "checkpoint  cannot be opened"."""
    args = ONE + ["--epochs", "1", "--checkpoint-dir", "ck", "--job-id", "r"]
    first = run(args, tmp, check=0)
    before = os.stat(os.path.join(tmp, "ck", "final.pt"))
    p = run(args, tmp, check=0)
    rid = run_id_of(first.stdout)
    expect(f"run {rid} is already complete (1 epochs, step 32); nothing to train" in p.stdout,
           "no 'already complete' message", p.stdout)
    expect("final.pt (already there)" in p.stdout, "final.pt was rewritten", p.stdout)
    expect("Epoch: [" not in p.stdout, "it trained again", p.stdout)
    after = os.stat(os.path.join(tmp, "ck", "final.pt"))
    expect(before.st_mtime_ns == after.st_mtime_ns, "final.pt was rewritten")
    # final.pt lost (say, a crash after the last checkpoint): the relaunch recreates it.
    os.unlink(os.path.join(tmp, "ck", "final.pt"))
    p = run(args, tmp, check=0)
    expect("already complete" in p.stdout, "no 'already complete' message", p.stdout)
    expect(model_state(os.path.join(tmp, "ck", "final.pt"))["step"] == 32, "final.pt not recreated")


def case_flipped_byte(tmp):
    """One flipped byte inside a weight of the newest checkpoint: torch.load reads it without a
    word (the zip CRCs are not checked), the trainer's checksum refuses it and the previous
    checkpoint is used. The checksum is the one the header documents (recomputed in Python)."""
    run(ONE + ["--epochs", "1", "--checkpoint-dir", "ck", "--checkpoint-every", "8",
               "--stop-after-steps", "24", "--job-id", "f1"], tmp, check=3)
    files = ckpts(os.path.join(tmp, "ck"))
    expect(len(files) == 3, f"checkpoints {files}")
    newest = os.path.join(tmp, "ck", files[-1])
    good = model_state(newest)
    expect(payload_crc(good) == good["payload_crc32"], "the documented checksum does not match")
    with zipfile.ZipFile(newest) as z:
        data = max((i for i in z.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    with open(newest, "rb") as f:
        raw = bytearray(f.read())
    name_len, extra_len = struct.unpack("<HH", raw[data.header_offset + 26:data.header_offset + 30])
    at = data.header_offset + 30 + name_len + extra_len + data.file_size // 2
    raw[at] ^= 0x10
    with open(newest, "wb") as f:
        f.write(raw)
    bad = model_state(newest)  # loads silently in Python
    expect(payload_crc(bad) != bad["payload_crc32"], "the flip did not change the payload")
    p = run(ONE + ["--epochs", "1", "--checkpoint-dir", "ck", "--job-id", "f2"], tmp, check=0)
    previous = os.path.join("ck", files[-2])
    expect(re.search(r"warning: skipping checkpoint: checkpoint \S+ is corrupt: payload checksum",
                     p.stdout), "the corrupt checkpoint was not skipped", p.stdout)
    expect(f"resuming from {previous} " in p.stdout, "did not resume from the previous one",
           p.stdout)


def case_umask(tmp):
    """Under umask 077 every checkpoint, final.pt, the manifest and the folder are private
    (they were 0644: anyone on a shared file system could read the weights)."""
    p = subprocess.run([TRAINER] + NO_LINGER + ONE + ["--epochs", "1", "--checkpoint-dir", "ck/deeper",
                                          "--checkpoint-every", "8", "--job-id", "u"],
                       cwd=tmp, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=300, preexec_fn=lambda: os.umask(0o077))
    expect(p.returncode == 0, f"exited {p.returncode}", p.stdout)
    for folder in ("ck", "ck/deeper"):
        mode = stat.S_IMODE(os.stat(os.path.join(tmp, folder)).st_mode)
        expect(mode == 0o700, f"{folder} is {oct(mode)}")
    names = os.listdir(os.path.join(tmp, "ck", "deeper"))
    expect("final.pt" in names and "current-run" in names and len(names) >= 4, f"files {names}")
    for name in names:
        mode = stat.S_IMODE(os.stat(os.path.join(tmp, "ck", "deeper", name)).st_mode)
        expect(mode == 0o600, f"{name} is {oct(mode)} under umask 077")


def case_dead_temp(tmp):
    """Rank 0 dies in the middle of writing a checkpoint (its file size limit, SIGXFSZ, stands in
    for the OOM killer or a node failure): the temp file it leaves is removed when the job
    starts again, and said so."""
    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 10, 256 << 10))
    p = subprocess.run([TRAINER] + NO_LINGER + ONE + ["--epochs", "1", "--checkpoint-dir", "ck",
                                          "--checkpoint-every", "4", "--job-id", "d1"],
                       cwd=tmp, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=300, preexec_fn=small_files)
    expect(p.returncode != 0, "the job survived its file size limit", p.stdout)
    left = [n for n in os.listdir(os.path.join(tmp, "ck")) if ".tmp." in n]
    expect(len(left) == 1 and left[0].startswith("ckpt-"), f"temp files left: {left}", p.stdout)
    p = run(ONE + ["--epochs", "1", "--checkpoint-dir", "ck", "--job-id", "d2"], tmp, check=0)
    expect(f"removed {left[0]}, a temp file of a writer that is gone" in p.stdout,
           "the dead writer's temp file was not reported", p.stdout)
    now = [n for n in os.listdir(os.path.join(tmp, "ck")) if ".tmp." in n]
    expect(now == [], f"temp files still there: {now}")


def case_mismatch(tmp):
    """Resuming with another --seed or a data set of another size is refused with a clear error
    (it would silently train on a different data order); --force-resume overrides it."""
    run(ONE + ["--epochs", "1", "--seed", "7", "--checkpoint-dir", "ck", "--stop-after-steps", "8",
               "--job-id", "m1"], tmp, check=3)
    start = time.monotonic()
    p = run(ONE + ["--epochs", "1", "--seed", "8", "--checkpoint-dir", "ck", "--job-id", "m2"], tmp,
            check=1)
    # The refusal ends the job at once: the coordinator that wrote FAILED is not restarted from
    # its journal, and the failed worker is not reported again to a coordinator that is gone
    # (that took the minute of --coordinator-grace, spinning a core).
    elapsed = time.monotonic() - start
    expect(elapsed < 20 and "restarting it from its journal" not in p.stdout
           and p.stdout.count("cannot report the lost worker") <= 1,
           f"the refused run took {elapsed:.1f} s or went on after the job failed", p.stdout)
    expect(re.search(r"error: checkpoint \S+ was written with --seed 7 \(this run: --seed 8\): "
                     r"resuming it would not continue the same training\. .*--force-resume",
                     p.stdout), "no clear seed error", p.stdout)
    other = [a if a != FAST[1] else "synthetic:500x1x8x8:10" for a in ONE]
    p = run(other + ["--epochs", "1", "--seed", "7", "--checkpoint-dir", "ck", "--job-id", "m3"],
            tmp, check=1)
    expect("a data set of 512 training samples (this run: 500)" in p.stdout,
           "no clear data set error", p.stdout)
    p = run(ONE + ["--epochs", "1", "--seed", "8", "--checkpoint-dir", "ck", "--force-resume",
                   "--job-id", "m4"], tmp, check=0)
    expect("resuming it anyway (--force-resume)" in p.stdout and "resuming from" in p.stdout,
           "--force-resume did not resume", p.stdout)
    help_text = subprocess.run([TRAINER, "--help"], stdout=subprocess.PIPE, text=True).stdout
    expect("--force-resume" in help_text, "--help does not document --force-resume", help_text)


def case_full_disk(tmp):
    """A real full file system (tmpfs): a periodic checkpoint that does not fit is a warning and
    training goes on with the older checkpoints kept; the stop checkpoint that does not fit exits
    3 naming the checkpoint to resume from (and the relaunch does), or 1 when there is none."""
    fs = os.path.join(tmp, "fs")
    os.makedirs(fs)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", fs],
                      stderr=subprocess.PIPE).returncode != 0:
        print("SKIPPED: cannot mount a tmpfs (needs root / CAP_SYS_ADMIN)")
        sys.exit(SKIP)
    try:
        # The size of one checkpoint of this model.
        run(ONE + ["--epochs", "1", "--checkpoint-dir", "probe", "--stop-after-steps", "1",
                   "--job-id", "probe"], tmp, check=3)
        size = os.path.getsize(glob.glob(os.path.join(tmp, "probe", "ckpt-*.pt"))[0])

        def leave_free(nbytes):
            filler = os.path.join(fs, "filler")
            if os.path.exists(filler):
                os.unlink(filler)
            st = os.statvfs(fs)
            with open(filler, "wb") as f:
                f.write(b"\0" * (st.f_bavail * st.f_frsize - nbytes))

        # Room for the manifest and one checkpoint and a half.
        leave_free(size * 3 // 2 + (64 << 10))
        args = ONE + ["--epochs", "1", "--checkpoint-dir", os.path.join(fs, "ck"),
                      "--checkpoint-every", "4"]
        p = run(args + ["--stop-after-steps", "10", "--job-id", "full1"], tmp, check=3)
        rid = run_id_of(p.stdout)
        kept = os.path.join(fs, "ck", f"ckpt-{rid}-0000000004.pt")
        expect(re.search(r"warning: checkpoint at step 8 not written \(.*No space left on device"
                         r".*\); training continues and keeps " + re.escape(kept), p.stdout),
               "no warning for the periodic checkpoint", p.stdout)
        expect(re.search(r"error: the stop checkpoint at step 10 could not be written \(.*No space "
                         r"left on device\); resumable from " + re.escape(kept), p.stdout),
               "the stop checkpoint failure does not name the checkpoint to resume", p.stdout)
        expect(ckpts(os.path.join(fs, "ck")) == [os.path.basename(kept)],
               f"files {os.listdir(os.path.join(fs, 'ck'))}")
        expect(model_state(kept)["step"] == 4, "the kept checkpoint does not load")
        # Space again: the relaunch resumes from the checkpoint it named and finishes.
        os.unlink(os.path.join(fs, "filler"))
        p = run(args + ["--job-id", "full2"], tmp, check=0)
        expect(f"resuming from {kept} (run {rid})" in p.stdout, "did not resume", p.stdout)
        expect(model_state(os.path.join(fs, "ck", "final.pt"))["step"] == 32, "no final.pt")
        # A new run with no room for even one checkpoint: nothing to resume, exit 1.
        leave_free(size // 2 + (64 << 10))
        p = run(ONE + ["--epochs", "1", "--checkpoint-dir", os.path.join(fs, "ck2"),
                       "--stop-after-steps", "3", "--job-id", "full3"], tmp, check=1)
        expect(re.search(r"error: the stop checkpoint at step 3 could not be written \(.*No space "
                         r"left on device\) and this run has no earlier checkpoint", p.stdout),
               "no clear error without an earlier checkpoint", p.stdout)
        expect(not [n for n in os.listdir(os.path.join(fs, "ck2")) if ".tmp." in n],
               "a temp file was left behind")
    finally:
        subprocess.run(["umount", "-l", fs])


CASES = {n[len("case_"):]: f for n, f in globals().items() if n.startswith("case_")}

if __name__ == "__main__":
    name = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix=f"ddp-ckpt-e2e-{name}-")
    try:
        CASES[name](tmp)
        print(f"PASS {name}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
