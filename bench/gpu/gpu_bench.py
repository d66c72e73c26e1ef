"""PyTorch side of bench/gpu/run.sh: world-1 NCCL DDP, torchvision ResNet-50, bf16 autocast,
channels-last, synthetic batch. Prints RESULT impl=python images_per_s=.. ms_per_step=.."""
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    warmup = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    batch = int(sys.argv[3]) if len(sys.argv) > 3 else 128
    torch.backends.cudnn.benchmark = True
    torch.cuda.set_device(0)
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("nccl", init_method="file://" + os.path.join(tmp, "store"),
                                rank=0, world_size=1)
        torch.manual_seed(0)
        model = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last)
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
        x = torch.randn(batch, 3, 224, 224, device="cuda").contiguous(
            memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (batch,), device="cuda")
        for step in range(warmup + steps):
            if step == warmup:
                torch.cuda.synchronize()
                start = time.perf_counter()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(ddp(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
        torch.cuda.synchronize()
        sec = time.perf_counter() - start
        print(f"RESULT impl=python images_per_s={steps * batch / sec:.1f} "
              f"ms_per_step={sec * 1000 / steps:.2f} loss={loss.item():.4f}", flush=True)
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
