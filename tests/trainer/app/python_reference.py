"""The original recipe in Python, as the reference ddp-trainer must match:
DistributedDataParallel + DistributedSampler + DataLoader on Fashion-MNIST, Gloo, 2 processes.

  python_reference.py export MODEL.pt          write the TorchScript model both sides train
  python_reference.py train MODEL.pt OUT.pt N  train N steps per rank with Python DDP, save rank 0's
                                               state_dict to OUT.pt
"""
import gzip
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530
SEED, BATCH, LR, MOMENTUM, WD, WORLD = 3, 32, 0.05, 0.9, 1e-4, 2


def load_idx_images(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    n, h, w = (int.from_bytes(raw[i:i + 4], "big") for i in (4, 8, 12))
    return np.frombuffer(raw, np.uint8, offset=16).reshape(n, 1, h, w)


def load_idx_labels(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    return np.frombuffer(raw, np.uint8, offset=8).astype(np.int64)


class Dataset(torch.utils.data.Dataset):
    def __init__(self):
        self.x = torch.from_numpy(load_idx_images(os.path.join(DATA, "train-images-idx3-ubyte.gz")).copy())
        self.y = torch.from_numpy(load_idx_labels(os.path.join(DATA, "train-labels-idx1-ubyte.gz")).copy())

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return (self.x[i].float() / 255.0 - MEAN) / STD, self.y[i]


def export(path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    torch.jit.script(model).save(path)


def worker(rank, model_path, out, steps, port):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    model = torch.jit.load(model_path)
    ddp = nn.parallel.DistributedDataParallel(model)
    data = Dataset()
    sampler = torch.utils.data.distributed.DistributedSampler(data, shuffle=True, seed=SEED)
    sampler.set_epoch(0)
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH, sampler=sampler)
    opt = torch.optim.SGD(ddp.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WD)
    loss_fn = nn.CrossEntropyLoss()
    for step, (x, y) in enumerate(loader):
        if step == steps:
            break
        opt.zero_grad()
        loss_fn(ddp(x), y).backward()
        opt.step()
    if rank == 0:
        torch.save({k: v.detach().clone() for k, v in model.state_dict().items()}, out)
    dist.destroy_process_group()


if __name__ == "__main__":
    if sys.argv[1] == "export":
        export(sys.argv[2])
    else:
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        mp.spawn(worker, args=(sys.argv[2], sys.argv[3], int(sys.argv[4]), port), nprocs=WORLD)
