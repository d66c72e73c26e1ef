"""PyTorch side of bench/ddp.sh: the same models, data, optimizer and world size as ddp_bench.cc,
trained with torch.nn.parallel.DistributedDataParallel over Gloo, one intra-op thread per rank.
Prints from rank 0 a ROUND line per timed round and a summary (the median round):
  ROUND impl=python round=.. ms_per_step=..
  RESULT impl=python model=.. world=.. bucket=.. ms_per_step=..
--handoff=IN,OUT takes turns with ddp_bench.cc through two FIFOs, as described there.
"""
import argparse
import os
import statistics
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


def timed(args, rank, step):
    """Runs step(): args.warmup untimed steps, then args.rounds rounds of args.steps steps, each
    timed from a barrier to a barrier; with --handoff, rank 0 waits for a byte on the IN FIFO
    before the warm-up and before each round and writes one to OUT after each. Returns the
    median ms per step over the rounds."""
    fifo_in = fifo_out = None
    if rank == 0 and args.handoff:
        names = args.handoff.split(",")
        fifo_in, fifo_out = os.open(names[0], os.O_RDWR), os.open(names[1], os.O_RDWR)
    per_round = []
    for r in range(args.rounds + 1):  # round 0: the warm-up
        if fifo_in is not None:
            os.read(fifo_in, 1)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(args.steps if r else args.warmup):
            step()
        dist.barrier()
        if r:
            per_round.append((time.perf_counter() - start) * 1000 / args.steps)
            if rank == 0:
                print(f"ROUND impl=python round={r} ms_per_step={per_round[-1]:.3f}", flush=True)
        if fifo_out is not None:
            os.write(fifo_out, b"x")
    return statistics.median(per_round)


def worker(rank, args, store):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank,
                            world_size=args.world)
    torch.manual_seed(0)
    if args.model == "allreduce":  # the communication floor: one SUM allreduce per step
        x = torch.ones(args.numel)
        ms = timed(args, rank, lambda: dist.all_reduce(x))
        if rank == 0:
            print(f"RESULT impl=python model=allreduce world={args.world} numel={args.numel} "
                  f"ms_per_step={ms:.3f}", flush=True)
        dist.destroy_process_group()
        return
    if args.model == "resnet18":
        model, x = ResNet18(), torch.randn(args.batch, 3, 32, 32)
    elif args.model == "tv-resnet18":  # ddp-trainer's --arch resnet18 is torchvision's layout
        import torchvision
        model, x = torchvision.models.resnet18(num_classes=10), torch.randn(args.batch, 3, 32, 32)
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

    ms = timed(args, rank, step)
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
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--handoff", default="")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--bucket_mb", default="25")
    p.add_argument("--numel", type=int, default=262144)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(worker, args=(args, os.path.join(tmp, "store")), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
