"""Python side of the DDP tests (run by ddp_test with $DDP_TORCH_PYTHON).

  ddp_reference.py script-mlp OUT.pt
      Saves a TorchScript MLP (20 -> 32 -> 16 -> 4) for the C++ equivalence tests.
  ddp_reference.py pytorch-ddp OUTDIR
      Writes OUTDIR/model.pt (the initial TorchScript model), OUTDIR/data.pt (a scripted holder of
      the data set and of the DistributedSampler indices each rank saw), then trains the model
      with PyTorch's own DistributedDataParallel, world 2, Gloo, DistributedSampler(shuffle,
      seed=7), and writes OUTDIR/final.pt (the trained model, TorchScript).
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

WORLD = 2
EPOCHS = 2
BATCH = 8
N = 72


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 32)
        self.fc2 = nn.Linear(32, 16)
        self.fc3 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class Holder(nn.Module):
    def __init__(self, x, y, idx):
        super().__init__()
        self.register_buffer("x", x)
        self.register_buffer("y", y)
        self.register_buffer("idx", idx)

    def forward(self, i: int) -> torch.Tensor:
        return self.x[i]


def data():
    g = torch.Generator().manual_seed(99)
    return torch.randn(N, 20, generator=g), torch.randint(0, 4, (N,), generator=g)


def worker(rank, outdir):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + os.path.join(outdir, "store"),
                            rank=rank, world_size=WORLD)
    model = Mlp()
    model.load_state_dict(torch.jit.load(os.path.join(outdir, "model.pt")).state_dict())
    ddp = DDP(model)
    x, y = data()
    sampler = DistributedSampler(TensorDataset(x, y), num_replicas=WORLD, rank=rank,
                                 shuffle=True, seed=7)
    loader = DataLoader(TensorDataset(x, y), batch_size=BATCH, sampler=sampler)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(ddp(xb), yb).backward()
            opt.step()
    if rank == 0:
        torch.jit.script(model).save(os.path.join(outdir, "final.pt"))
    dist.destroy_process_group()


def main():
    if sys.argv[1] == "script-mlp":
        torch.manual_seed(5)
        torch.jit.script(Mlp()).save(sys.argv[2])
        return
    outdir = sys.argv[2]
    torch.manual_seed(3)
    torch.jit.script(Mlp()).save(os.path.join(outdir, "model.pt"))
    x, y = data()
    idx = torch.zeros(EPOCHS, WORLD, N // WORLD, dtype=torch.long)
    for epoch in range(EPOCHS):
        for r in range(WORLD):
            s = DistributedSampler(TensorDataset(x, y), num_replicas=WORLD, rank=r, shuffle=True,
                                   seed=7)
            s.set_epoch(epoch)
            idx[epoch, r] = torch.tensor(list(s))
    torch.jit.script(Holder(x, y, idx)).save(os.path.join(outdir, "data.pt"))
    mp.spawn(worker, args=(outdir,), nprocs=WORLD, join=True)


if __name__ == "__main__":
    main()
