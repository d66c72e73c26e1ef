// The recipe's ImageNet transforms, applied to a decoded RGB image, producing a normalized
// float32 CHW tensor. They follow torchvision:
//   train: RandomResizedCrop(size, scale=(0.08, 1), ratio=(3/4, 4/3)) + RandomHorizontalFlip(0.5)
//   eval:  Resize(resize) (shorter side) + CenterCrop(size)
// then ToTensor (scale to [0,1]) and Normalize. Resizing is bilinear with antialiasing
// (torch's _upsample_bilinear2d_aa, as torchvision's tensor path), so pixel values are close to,
// not bit-identical with, PIL's.
//
// Randomness comes from a SampleRng seeded with (seed, epoch, index), so the crop and flip of a
// sample are reproducible regardless of thread scheduling.
//
// Thread safety: pure functions.
#ifndef SLURM_DDP_TRAINER_DATA_IMAGE_TRANSFORMS_H_
#define SLURM_DDP_TRAINER_DATA_IMAGE_TRANSFORMS_H_

#include <ATen/ATen.h>

#include "trainer/data/dataset.h"
#include "trainer/data/jpeg_codec.h"
#include "trainer/data/sample_rng.h"

namespace ddp::data {

struct CropBox {
  int top = 0;
  int left = 0;
  int height = 0;
  int width = 0;
};

struct RandomResizedCropOptions {
  double scale_min = 0.08;
  double scale_max = 1.0;
  double ratio_min = 3.0 / 4.0;
  double ratio_max = 4.0 / 3.0;
};

// torchvision's RandomResizedCrop.get_params: 10 tries at a random area and aspect ratio, then a
// central crop clamped to the ratio range.
CropBox RandomResizedCropBox(int height, int width, SampleRng& rng,
                             const RandomResizedCropOptions& options = {});

// torchvision's Resize(int) output size: shorter side `size`, longer side scaled (truncated).
void ShorterSideResize(int height, int width, int size, int* out_height, int* out_width);

// RandomResizedCrop(size) + RandomHorizontalFlip + ToTensor + Normalize. [3,size,size] float.
at::Tensor TrainTransform(const RgbImage& image, int size, SampleRng& rng,
                          const Normalization& normalization);

// The `window` (inside [0, out_h) x [0, out_w)) of the antialiased bilinear resize of `image` to
// out_h x out_w, bit for bit what torch's _upsample_bilinear2d_aa gives on uint8 (its integer
// weights and separable passes, horizontal first), computing only the input rows and columns the
// window needs: its cost is the window's, not the whole resized image's. [1,3,h,w] uint8.
at::Tensor ResizeWindow(const RgbImage& image, int out_h, int out_w, const CropBox& window);

// Resize(resize) + CenterCrop(size) + ToTensor + Normalize. [3,size,size] float. size <= resize.
// Only the center crop is resized (ResizeWindow): a 1x65500 image costs a 224x224 crop's work,
// not the 256x16768000 image it resizes to.
at::Tensor EvalTransform(const RgbImage& image, int resize, int size,
                         const Normalization& normalization);

}  // namespace ddp::data

#endif  // SLURM_DDP_TRAINER_DATA_IMAGE_TRANSFORMS_H_
