"""The Python recipe bench/trainer.sh compares ddp-trainer against: DistributedDataParallel +
DistributedSampler + DataLoader (num_workers=0, in-process), Gloo on CPU, one intra-op thread per
rank, SGD (momentum 0.9, weight decay 1e-4), cross-entropy, no evaluation. The loop mirrors
ddp-trainer's (trainer/app/training_loop.cc): loss.item() and top-1/top-5 only on print steps,
and rank 0 prints the same progress line, flushed, every PRINT_FREQ steps:
  Epoch: [0][  i/n]\tTime last (avg)\tData last (avg)\tLoss ...

  python_recipe.py mlp      BATCH WARMUP STEPS PRINT_FREQ [FASHION_MNIST_DIR]
  python_recipe.py resnet18 BATCH WARMUP STEPS PRINT_FREQ SAMPLES

mlp: Fashion-MNIST IDX files, per-sample (x/255 - 0.2860)/0.3530 as in the reference recipe
(tests/trainer/app/python_reference.py), and the eager twin of ddp-trainer's --arch mlp
(784-512-256-10, ReLU; trainer/models/simple_nets.cc). resnet18: torchvision.models.resnet18
(num_classes=10) on SAMPLES random 3x32x32 images in [0,1) held in memory (a TensorDataset).
Runs WARMUP + STEPS + 1 steps of epoch 0 then exits.
"""
import gzip
import os
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

WORLD, LR, MOMENTUM, WD, SEED = 2, 0.05, 0.9, 1e-4, 0
MEAN, STD = 0.2860, 0.3530


def load_idx(path, offset):
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


class FashionMnist(torch.utils.data.Dataset):
    def __init__(self, root):
        x = load_idx(os.path.join(root, "train-images-idx3-ubyte.gz"), 16)
        self.x = torch.from_numpy(x.reshape(-1, 1, 28, 28).copy())
        y = load_idx(os.path.join(root, "train-labels-idx1-ubyte.gz"), 8)
        self.y = torch.from_numpy(y.astype(np.int64))

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return (self.x[i].float() / 255.0 - MEAN) / STD, self.y[i]


class Mlp(nn.Module):  # ddp-trainer --arch mlp
    def __init__(self, inputs, classes):
        super().__init__()
        self.fc1 = nn.Linear(inputs, 512)
        self.fc2 = nn.Linear(512, 256)
        self.fc3 = nn.Linear(256, classes)

    def forward(self, x):
        x = torch.relu(self.fc1(x.flatten(1)))
        return self.fc3(torch.relu(self.fc2(x)))


class Meter:
    def __init__(self):
        self.last = self.sum = 0.0
        self.count = 0

    def add(self, v, n=1):
        self.last = v
        self.sum += v * n
        self.count += n

    def avg(self):
        return self.sum / self.count if self.count else 0.0


def worker(rank, args, port):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    arch, batch, warmup, steps, print_freq = args[0], *map(int, args[1:5])
    torch.manual_seed(SEED)
    if arch == "mlp":
        data = FashionMnist(args[5] if len(args) > 5 else "/usr/share/datasets/fashion-mnist")
        model = Mlp(784, 10)
    else:
        import torchvision
        g = torch.Generator().manual_seed(SEED)
        n = int(args[5])
        data = torch.utils.data.TensorDataset(torch.rand(n, 3, 32, 32, generator=g),
                                              torch.randint(0, 10, (n,), generator=g))
        model = torchvision.models.resnet18(num_classes=10)
    ddp = nn.parallel.DistributedDataParallel(model)
    sampler = torch.utils.data.distributed.DistributedSampler(data, shuffle=True, seed=SEED)
    sampler.set_epoch(0)
    loader = torch.utils.data.DataLoader(data, batch_size=batch, sampler=sampler, num_workers=0)
    opt = torch.optim.SGD(ddp.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WD)
    loss_fn = nn.CrossEntropyLoss()
    batches = len(loader)
    last = warmup + steps
    assert last < batches, f"{last + 1} steps need more than one epoch ({batches} batches)"
    ddp.train()
    batch_time, data_time, losses, top1, top5 = Meter(), Meter(), Meter(), Meter(), Meter()
    width = len(str(batches))
    tick = time.perf_counter()
    for i, (x, y) in enumerate(loader):
        data_s = time.perf_counter() - tick
        logits = ddp(x)
        loss = loss_fn(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        now = time.perf_counter()
        batch_time.add(now - tick)
        data_time.add(data_s)
        tick = now
        if i % print_freq == 0:
            n = y.size(0)
            losses.add(loss.item(), n)
            with torch.no_grad():
                hit = logits.detach().topk(5, 1).indices.eq(y.view(-1, 1))
                top1.add(100.0 * hit[:, :1].sum().item() / n, n)
                top5.add(100.0 * hit.sum().item() / n, n)
            if rank == 0:
                print(f"Epoch: [0][{i:{width}d}/{batches}]\tTime {batch_time.last:6.3f} "
                      f"({batch_time.avg():6.3f})\tData {data_time.last:6.3f} ({data_time.avg():6.3f})"
                      f"\tLoss {losses.last:.4e} ({losses.avg():.4e})\tAcc@1 {top1.last:6.2f} "
                      f"({top1.avg():6.2f})\tAcc@5 {top5.last:6.2f} ({top5.avg():6.2f})\tlr {LR:.4g}",
                      flush=True)
        if i == last:
            break
    dist.destroy_process_group()


if __name__ == "__main__":
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    mp.spawn(worker, args=(sys.argv[1:], port), nprocs=WORLD)
