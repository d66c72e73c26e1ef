#include "trainer/data/tensor_transforms.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "trainer/data/in_memory_dataset.h"

namespace ddp::data {

TransformPlan PlanTrain(int height, int width, int size, SampleRng& rng) {
  TransformPlan plan;
  plan.source = RandomResizedCropBox(height, width, rng);
  plan.flip = rng.Uniform() < 0.5;  // drawn after the box, as TrainTransform
  plan.resize_h = size;
  plan.resize_w = size;
  plan.output = CropBox{0, 0, size, size};
  return plan;
}

TransformPlan PlanEval(int height, int width, int resize, int size) {
  TransformPlan plan;
  plan.source = CropBox{0, 0, height, width};
  ShorterSideResize(height, width, resize, &plan.resize_h, &plan.resize_w);
  plan.output = CropBox{static_cast<int>(std::nearbyint((plan.resize_h - size) / 2.0)),
                        static_cast<int>(std::nearbyint((plan.resize_w - size) / 2.0)), size, size};
  return plan;
}

void ApplyPlan(const at::Tensor& hwc, const TransformPlan& plan, at::Tensor out) {
  const CropBox& s = plan.source;
  at::Tensor x = hwc.slice(0, s.top, s.top + s.height)
                     .slice(1, s.left, s.left + s.width)
                     .permute({2, 0, 1})
                     .unsqueeze(0)
                     .to(at::kFloat);
  if (s.height != plan.resize_h || s.width != plan.resize_w) {
    const std::vector<int64_t> size = {plan.resize_h, plan.resize_w};
    x = at::_upsample_bilinear2d_aa(x, at::OptionalIntArrayRef(size), /*align_corners=*/false,
                                    std::optional<at::ArrayRef<double>>());
    x = x.round_().clamp_(0, 255);  // the CPU pipeline resizes in uint8
  }
  const CropBox& o = plan.output;
  x = x.slice(2, o.top, o.top + o.height).slice(3, o.left, o.left + o.width);
  if (plan.flip) x = x.flip({3});
  out.copy_(x[0]);
}

CropResizeJob JobOf(const TransformPlan& plan, const uint8_t* src, int height, int width) {
  CropResizeJob job;
  job.src = src;
  job.src_h = height;
  job.src_w = width;
  job.box_top = plan.source.top;
  job.box_left = plan.source.left;
  job.box_h = plan.source.height;
  job.box_w = plan.source.width;
  job.resize_h = plan.resize_h;
  job.resize_w = plan.resize_w;
  job.out_top = plan.output.top;
  job.out_left = plan.output.left;
  job.flip = plan.flip ? 1 : 0;
  return job;
}

ChannelAffine AffineOf(const Normalization& normalization) {
  const std::vector<float> mean = ExpandPerChannel(normalization.mean, 3, 0.0f);
  const std::vector<float> stddev = ExpandPerChannel(normalization.std, 3, 1.0f);
  ChannelAffine affine;
  for (size_t c = 0; c < 3; ++c) {
    affine.scale[c] = 1.0f / (255.0f * stddev[c]);
    affine.shift[c] = -mean[c] / stddev[c];
  }
  return affine;
}

void NormalizeBatch(at::Tensor& batch, const Normalization& normalization) {
  const ChannelAffine affine = AffineOf(normalization);
  // Scalars, not device tensors: no host-to-device copy, so the caller's stream never waits.
  for (int64_t c = 0; c < std::min<int64_t>(batch.size(1), 3); ++c) {
    batch.select(1, c).mul_(affine.scale[c]).add_(affine.shift[c]);
  }
}

}  // namespace ddp::data
