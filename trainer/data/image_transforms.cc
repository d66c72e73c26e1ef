#include "trainer/data/image_transforms.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "trainer/data/in_memory_dataset.h"

namespace ddp::data {
namespace {

// Python's round(): half to even (the default floating-point rounding mode).
int RoundHalfEven(double x) { return static_cast<int>(std::nearbyint(x)); }

// Crops `box` out of `image` and resizes it to out_h x out_w (bilinear, antialiased), optionally
// flipping it horizontally. Returns [1,3,out_h,out_w] uint8 (any memory layout).
at::Tensor CropResize(const RgbImage& image, const CropBox& box, int out_h, int out_w, bool flip) {
  // HWC bytes viewed as a channels-last NCHW tensor: no copy. from_blob wants a non-const pointer;
  // nothing writes through it.
  at::Tensor hwc = at::from_blob(const_cast<uint8_t*>(image.pixels.data()),
                                 {1, image.height, image.width, 3}, at::TensorOptions(at::kByte));
  at::Tensor crop = hwc.slice(1, box.top, box.top + box.height)
                        .slice(2, box.left, box.left + box.width)
                        .permute({0, 3, 1, 2});
  at::Tensor resized;
  if (box.height == out_h && box.width == out_w) {
    resized = crop;
  } else {
    // uint8 channels-last input takes torch's vectorized antialiased path.
    const std::vector<int64_t> size = {out_h, out_w};
    resized = at::_upsample_bilinear2d_aa(crop.contiguous(at::MemoryFormat::ChannelsLast),
                                          at::OptionalIntArrayRef(size), /*align_corners=*/false,
                                          std::optional<at::ArrayRef<double>>());
  }
  if (flip) resized = resized.flip({3});
  return resized;
}

// [1,3,h,w] uint8 -> [3,h,w] float32, contiguous: x / 255, then (x - mean) / std per channel.
at::Tensor ToNormalizedFloat(const at::Tensor& u8, const Normalization& normalization) {
  at::Tensor out = at::empty({3, u8.size(2), u8.size(3)}, at::TensorOptions(at::kFloat));
  out.copy_(u8[0]);
  const std::vector<float> mean = ExpandPerChannel(normalization.mean, 3, 0.0f);
  const std::vector<float> stddev = ExpandPerChannel(normalization.std, 3, 1.0f);
  float* data = out.data_ptr<float>();
  const int64_t plane = u8.size(2) * u8.size(3);
  for (size_t c = 0; c < 3; ++c) {
    const float scale = 1.0f / (255.0f * stddev[c]);
    const float shift = -mean[c] / stddev[c];
    float* p = data + static_cast<int64_t>(c) * plane;
    for (int64_t i = 0; i < plane; ++i) p[i] = p[i] * scale + shift;
  }
  return out;
}

}  // namespace

CropBox RandomResizedCropBox(int height, int width, SampleRng& rng,
                             const RandomResizedCropOptions& options) {
  const double area = static_cast<double>(height) * width;
  const double log_min = std::log(options.ratio_min);
  const double log_max = std::log(options.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.Uniform(options.scale_min, options.scale_max);
    const double aspect = std::exp(rng.Uniform(log_min, log_max));
    const int w = RoundHalfEven(std::sqrt(target_area * aspect));
    const int h = RoundHalfEven(std::sqrt(target_area / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const int top = static_cast<int>(rng.UniformInt(0, height - h + 1));
      const int left = static_cast<int>(rng.UniformInt(0, width - w + 1));
      return CropBox{top, left, h, w};
    }
  }
  // Fallback: central crop.
  const double in_ratio = static_cast<double>(width) / height;
  int w = width;
  int h = height;
  if (in_ratio < options.ratio_min) {
    h = RoundHalfEven(w / options.ratio_min);
  } else if (in_ratio > options.ratio_max) {
    w = RoundHalfEven(h * options.ratio_max);
  }
  return CropBox{(height - h) / 2, (width - w) / 2, h, w};
}

void ShorterSideResize(int height, int width, int size, int* out_height, int* out_width) {
  if (height <= width) {
    *out_height = size;
    *out_width = static_cast<int>(static_cast<double>(size) * width / height);
  } else {
    *out_width = size;
    *out_height = static_cast<int>(static_cast<double>(size) * height / width);
  }
}

at::Tensor TrainTransform(const RgbImage& image, int size, SampleRng& rng,
                          const Normalization& normalization) {
  const CropBox box = RandomResizedCropBox(image.height, image.width, rng);
  const bool flip = rng.Uniform() < 0.5;
  return ToNormalizedFloat(CropResize(image, box, size, size, flip), normalization);
}

at::Tensor EvalTransform(const RgbImage& image, int resize, int size,
                         const Normalization& normalization) {
  int h = 0;
  int w = 0;
  ShorterSideResize(image.height, image.width, resize, &h, &w);
  const int top = RoundHalfEven((h - size) / 2.0);
  const int left = RoundHalfEven((w - size) / 2.0);
  const CropBox whole{0, 0, image.height, image.width};
  at::Tensor resized = CropResize(image, whole, h, w, /*flip=*/false);
  return ToNormalizedFloat(resized.slice(2, top, top + size).slice(3, left, left + size),
                           normalization);
}

}  // namespace ddp::data
