"""GPU check: ddp-trainer against PyTorch's Python DDP on CUDA, fp32, deterministic algorithms.

Both sides train the same TorchScript model (a small CNN) on the same MNIST-format data with the
same DistributedSampler order, SGD settings and steps; their final weights must agree within 1e-4.

  equivalence.py data DIR N          write N train (+N/6 test) 28x28 images in MNIST IDX format
  equivalence.py export MODEL.pt     write the TorchScript model both sides train
  equivalence.py train MODEL.pt DIR OUT.pt STEPS BACKEND WORLD
                                     Python DDP on cuda:0 (WORLD processes), rank 0's state to OUT
  equivalence.py compare OURS.pt THEIRS.pt   prints max |ours - theirs|, exit 1 above 1e-4
"""
import gzip
import os
import sys
import tempfile

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

DEVICE = os.environ.get("EQUIV_DEVICE", "cuda")  # "cpu" to try the script without a GPU
MEAN, STD = 0.1307, 0.3081  # ddp-trainer's default normalization for mnist:DIR
SEED, BATCH, LR, MOMENTUM, WD = 3, 32, 0.05, 0.9, 1e-4


def write_idx(path, array, magic):
    with gzip.open(path, "wb") as f:
        f.write(magic.to_bytes(4, "big"))
        for d in array.shape:
            f.write(int(d).to_bytes(4, "big"))
        f.write(array.astype(np.uint8).tobytes())


def make_data(folder, n):
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    patterns = rng.integers(0, 256, size=(10, 28, 28))
    for split, count in (("train", n), ("t10k", max(1, n // 6))):
        labels = rng.integers(0, 10, size=count)
        images = np.clip(patterns[labels] * 0.6 + rng.integers(0, 100, size=(count, 28, 28)), 0, 255)
        write_idx(os.path.join(folder, f"{split}-images-idx3-ubyte.gz"), images, 0x803)
        write_idx(os.path.join(folder, f"{split}-labels-idx1-ubyte.gz"), labels, 0x801)


def export(path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 8, 3, stride=2), nn.ReLU(), nn.Conv2d(8, 16, 3, stride=2),
                          nn.ReLU(), nn.Flatten(), nn.Linear(16 * 6 * 6, 10))
    torch.jit.script(model).save(path)


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * dims).reshape(shape)


def worker(rank, world, backend, model_path, folder, out, steps, init):
    if DEVICE == "cuda":
        torch.cuda.set_device(0)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    dist.init_process_group(backend, init_method=init, rank=rank, world_size=world)
    x = torch.from_numpy(read_idx(os.path.join(folder, "train-images-idx3-ubyte.gz")).copy())
    y = torch.from_numpy(read_idx(os.path.join(folder, "train-labels-idx1-ubyte.gz")).astype(np.int64))
    data = torch.utils.data.TensorDataset(((x.float() / 255.0 - MEAN) / STD).unsqueeze(1), y)
    sampler = torch.utils.data.distributed.DistributedSampler(data, shuffle=True, seed=SEED)
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH, sampler=sampler)
    model = torch.jit.load(model_path).to(DEVICE)
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[0] if backend == "nccl" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WD)
    step, epoch = 0, 0
    while step < steps:
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            loss = nn.functional.cross_entropy(ddp(xb.to(DEVICE)), yb.to(DEVICE))
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step == steps:
                break
        epoch += 1
    if rank == 0:
        torch.save({k: v.cpu() for k, v in model.state_dict().items()}, out)
    dist.destroy_process_group()


def train(model_path, folder, out, steps, backend, world):
    with tempfile.TemporaryDirectory() as tmp:
        init = "file://" + os.path.join(tmp, "store")
        mp.spawn(worker, args=(world, backend, model_path, folder, out, steps, init), nprocs=world)


def compare(ours_path, theirs_path):
    import torch.jit._pickle  # noqa: F401  (LibTorch's pickler tags typed containers)
    with torch.serialization.safe_globals([torch.jit._pickle.restore_type_tag]):
        ours = torch.load(ours_path)["model"]
    theirs = torch.load(theirs_path)
    worst = 0.0
    for k, v in theirs.items():
        if k not in ours:
            sys.exit(f"{k} missing from our checkpoint")
        worst = max(worst, (ours[k].float() - v.float()).abs().max().item())
    print(f"max_abs_diff={worst:.3g}")
    sys.exit(0 if worst <= 1e-4 else 1)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "data":
        make_data(sys.argv[2], int(sys.argv[3]))
    elif cmd == "export":
        export(sys.argv[2])
    elif cmd == "train":
        train(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6], int(sys.argv[7]))
    elif cmd == "compare":
        compare(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
