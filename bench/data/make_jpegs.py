"""Writes ROOT/{train,val}/classNN/imgNNNNN.jpg: N train images (and N/10 val) of about
WIDTHxHEIGHT (+-15%), smooth random content, JPEG quality 90, spread over CLASSES classes."""
import os
import sys

import numpy as np
from PIL import Image

root, n, classes, width, height = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rng = np.random.default_rng(0)
for split, count in (("train", n), ("val", max(1, n // 10))):
    for i in range(count):
        c = i % classes
        folder = os.path.join(root, split, "class%02d" % c)
        os.makedirs(folder, exist_ok=True)
        w = int(width * rng.uniform(0.85, 1.15))
        h = int(height * rng.uniform(0.85, 1.15))
        small = rng.integers(0, 256, size=(h // 16 + 1, w // 16 + 1, 3), dtype=np.uint8)
        image = Image.fromarray(small).resize((w, h), Image.BILINEAR)
        noise = rng.integers(-20, 20, size=(h, w, 3))
        pixels = np.clip(np.asarray(image, dtype=np.int16) + noise, 0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(os.path.join(folder, "img%05d.jpg" % i), quality=90)
