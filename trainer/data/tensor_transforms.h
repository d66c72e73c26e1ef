// The recipe's ImageNet transforms (image_transforms.h) on decoded image tensors of any device:
// the GPU JPEG pipeline runs them on the GPU after nvJPEG; the unit tests run the same code on the
// CPU against the CPU pipeline.
//
// A transform is first planned from the image size alone (PlanTrain / PlanEval: the same crop and
// flip as TrainTransform / EvalTransform draw from the same SampleRng), then applied to the
// decoded [H, W, 3] uint8 image. Resizing is bilinear with antialiasing in float32, rounded back
// to the 0..255 grid as the CPU pipeline's uint8 resize is, so the two pipelines differ by at
// most one grey level per pixel before normalization.
//
// Thread safety: pure functions. Apply() enqueues work on the current stream of the tensors'
// device.
#ifndef SLURM_DDP_TRAINER_DATA_TENSOR_TRANSFORMS_H_
#define SLURM_DDP_TRAINER_DATA_TENSOR_TRANSFORMS_H_

#include <ATen/ATen.h>

#include "trainer/data/crop_resize.h"
#include "trainer/data/dataset.h"
#include "trainer/data/image_transforms.h"
#include "trainer/data/sample_rng.h"

namespace ddp::data {

// source crop -> resize to (resize_h, resize_w) -> output crop -> optional horizontal flip.
struct TransformPlan {
  CropBox source;
  int resize_h = 0;
  int resize_w = 0;
  CropBox output;
  bool flip = false;
};

// RandomResizedCrop(size) + RandomHorizontalFlip, drawing from `rng` as TrainTransform does.
TransformPlan PlanTrain(int height, int width, int size, SampleRng& rng);
// Resize(resize) (shorter side) + CenterCrop(size), as EvalTransform.
TransformPlan PlanEval(int height, int width, int resize, int size);

// Writes the planned image into `out` ([3, S, S] float32, S = plan.output size) as values on the
// 0..255 grid (not yet normalized). `hwc` is [H, W, 3] uint8 on the same device as `out`.
void ApplyPlan(const at::Tensor& hwc, const TransformPlan& plan, at::Tensor out);

// The fused kernel's description of the same transform, for a decoded [h, w, 3] image at `src`.
CropResizeJob JobOf(const TransformPlan& plan, const uint8_t* src, int height, int width);
// The normalization as x * scale + shift on the 0..255 grid (NormalizeBatch's arithmetic).
ChannelAffine AffineOf(const Normalization& normalization);

// In place on [B, 3, S, S] float32 values on the 0..255 grid: x / 255, then (x - mean) / std, with
// the same float arithmetic as the CPU pipeline (x * (1 / (255 std)) + (-mean / std)).
void NormalizeBatch(at::Tensor& batch, const Normalization& normalization);

}  // namespace ddp::data

#endif  // SLURM_DDP_TRAINER_DATA_TENSOR_TRANSFORMS_H_
