"""PyTorch side of bench/ddp.sh: the same models, data, optimizer and world size as ddp_bench.cc,
trained with torch.nn.parallel.DistributedDataParallel over Gloo, one intra-op thread per rank.
Prints from rank 0:  RESULT impl=python model=.. world=.. bucket=.. ms_per_step=..
"""
import argparse
import os
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


def mlp(widths):
    layers = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (self.shortcut(x) if self.shortcut is not None else x))


class ResNet18(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        layers, cin = [], 64
        for i, w in enumerate([64, 128, 256, 512]):
            blocks = []
            for b in range(2):
                blocks.append(BasicBlock(cin, w, 2 if (b == 0 and i > 0) else 1))
                cin = w
            layers.append(nn.Sequential(*blocks))
        self.layers = nn.ModuleList(layers)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        for layer in self.layers:
            y = layer(y)
        return self.fc(F.adaptive_avg_pool2d(y, 1).flatten(1))


def timed(args, step):
    """Runs step() warmup + steps times; returns ms per step of the timed window, which starts
    at a barrier after the warm-up and ends at a barrier after the last step."""
    for i in range(args.warmup + args.steps):
        if i == args.warmup:
            dist.barrier()
            start = time.perf_counter()
        step()
    dist.barrier()
    return (time.perf_counter() - start) * 1000 / args.steps


def worker(rank, args, store):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank,
                            world_size=args.world)
    torch.manual_seed(0)
    if args.model == "allreduce":  # the communication floor: one SUM allreduce per step
        x = torch.ones(args.numel)
        ms = timed(args, lambda: dist.all_reduce(x))
        if rank == 0:
            print(f"RESULT impl=python model=allreduce world={args.world} numel={args.numel} "
                  f"ms_per_step={ms:.3f}", flush=True)
        dist.destroy_process_group()
        return
    if args.model == "resnet18":
        model, x = ResNet18(), torch.randn(args.batch, 3, 32, 32)
    elif args.model == "mlp-large":
        model, x = mlp([784, 1024, 1024, 1024, 10]), torch.randn(args.batch, 784)
    else:
        model, x = mlp([784, 256, 128, 10]), torch.randn(args.batch, 784)
    y = torch.randint(0, 10, (args.batch,))
    if args.bucket_mb == "per-param":
        # A cap below the smallest gradient puts every parameter in its own bucket.
        ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1e-9)
    else:
        ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=float(args.bucket_mb))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)

    def step():
        F.cross_entropy(ddp(x), y).backward()
        opt.step()
        opt.zero_grad()

    ms = timed(args, step)
    if rank == 0:
        print(f"RESULT impl=python model={args.model} world={args.world} "
              f"bucket={args.bucket_mb} ms_per_step={ms:.3f}", flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="mlp")
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--bucket_mb", default="25")
    p.add_argument("--numel", type=int, default=262144)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(worker, args=(args, os.path.join(tmp, "store")), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
