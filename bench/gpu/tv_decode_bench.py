"""torchvision's GPU JPEG decoding on the same image folder as ddp_gpu_jpeg_bench, in images/s:
  torchvision-gpu-decode     torchvision.io.decode_jpeg(list of file tensors, device="cuda")
  torchvision-gpu-pipeline   the same, then per image RandomResizedCrop(224) + flip + normalize
                             on the GPU (torchvision.transforms.v2), stacked into a batch
Files are read into memory first (not timed). Prints RESULT lines like ddp_gpu_jpeg_bench.
  tv_decode_bench.py FOLDER [BATCH=128] [PASSES=2]
"""
import glob
import os
import sys
import time

import torch
import torchvision
from torchvision.io import decode_jpeg, read_file
from torchvision.transforms import v2


def main():
    folder = sys.argv[1]
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 128
    passes = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    files = sorted(glob.glob(os.path.join(folder, "train", "*", "*.jpg")))
    data = [read_file(f) for f in files]
    print(f"torchvision {torchvision.__version__}: {len(data)} files", flush=True)
    transform = v2.Compose([
        v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip(),
        v2.ToDtype(torch.float32, scale=True),
        v2.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    for name, with_transforms in (("torchvision-gpu-decode", False),
                                  ("torchvision-gpu-pipeline", True)):
        images, seconds = 0, 0.0
        for p in range(passes + 1):  # pass 0 warms up
            torch.cuda.synchronize()
            start = time.perf_counter()
            for b in range(0, len(data), batch):
                decoded = decode_jpeg(data[b:b + batch], device="cuda")
                if with_transforms:
                    out = torch.stack([transform(img) for img in decoded])
            torch.cuda.synchronize()
            if p > 0:
                images += len(data)
                seconds += time.perf_counter() - start
        print(f"RESULT pipeline={name} images_per_s={images / seconds:.1f} images={images} "
              f"seconds={seconds:.2f}", flush=True)


if __name__ == "__main__":
    main()
