#include "trainer/data/tensor_transforms.h"

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

void NormalizeBatch(at::Tensor& batch, const Normalization& normalization) {
  const int64_t channels = batch.size(1);
  const std::vector<float> mean = ExpandPerChannel(normalization.mean, channels, 0.0f);
  const std::vector<float> stddev = ExpandPerChannel(normalization.std, channels, 1.0f);
  // Scalars, not device tensors: no host-to-device copy, so the caller's stream never waits.
  for (int64_t c = 0; c < channels; ++c) {
    const float scale = 1.0f / (255.0f * stddev[static_cast<size_t>(c)]);
    const float shift = -mean[static_cast<size_t>(c)] / stddev[static_cast<size_t>(c)];
    batch.select(1, c).mul_(scale).add_(shift);
  }
}

}  // namespace ddp::data
