"""torchvision's ImageFolder + DataLoader on ROOT/train with the recipe's train transforms:
RandomResizedCrop(224) + RandomHorizontalFlip + ToTensor + Normalize(ImageNet), WORKERS worker
processes, one epoch in order. Prints "torchvision: N images in S s = R images/s"."""
import sys
import time

import torch
import torchvision.datasets as datasets
import torchvision.transforms as transforms

root, workers, batch_size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(1)
normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
dataset = datasets.ImageFolder(root + "/train", transforms.Compose([
    transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
    normalize]))
start = time.perf_counter()  # includes worker start-up, as ours includes thread start-up
loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=False,
                                     num_workers=workers)
images = 0
for batch, _ in loader:
    images += batch.shape[0]
seconds = time.perf_counter() - start
print("torchvision: %d images in %.2f s = %.1f images/s" % (images, seconds, images / seconds))
