#include "trainer/data/image_transforms.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
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

// One axis of torch's antialiased bilinear resize on uint8 (UpSampleKernel.cpp,
// compute_index_ranges_int16_weights): double weights per output index, normalized, then scaled
// to int16 with a precision chosen from the largest weight over the whole axis, so that a window
// of the output gets the weights the full resize would use.
struct AxisTaps {
  bool identity = false;       // in == out: torch skips this pass
  unsigned int precision = 0;  // weights are w * 2^precision
  int64_t max_taps = 0;
  std::vector<int64_t> first;    // per window index: first input index
  std::vector<int64_t> count;    // ... and the number of taps
  std::vector<int32_t> weights;  // max_taps per window index
};

double Triangle(double x) {
  x = std::abs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Torch's _compute_indices_min_size_weights_aa for output index i (align_corners = false):
// writes normalized weights to w[0, max_taps) and returns the largest.
double TapsOf(int64_t i, int64_t in_size, double scale, double support, int64_t max_taps, double* w,
              int64_t* first, int64_t* count) {
  const double center = scale * (static_cast<double>(i) + 0.5);
  const double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
  const int64_t xmin = std::max(static_cast<int64_t>(center - support + 0.5), int64_t{0});
  int64_t xsize = std::min(static_cast<int64_t>(center + support + 0.5), in_size) - xmin;
  xsize = std::clamp(xsize, int64_t{0}, max_taps);
  double total = 0.0;
  for (int64_t j = 0; j < xsize; ++j) {
    w[j] = Triangle((static_cast<double>(j + xmin) - center + 0.5) * invscale);
    total += w[j];
  }
  double wt_max = 0.0;
  if (total != 0.0) {
    for (int64_t j = 0; j < xsize; ++j) {
      w[j] /= total;
      wt_max = std::max(wt_max, w[j]);
    }
  }
  for (int64_t j = xsize; j < max_taps; ++j) w[j] = 0.0;
  *first = xmin;
  *count = xsize;
  return wt_max;
}

AxisTaps PlanAxis(int64_t in_size, int64_t out_size, int64_t begin, int64_t n) {
  AxisTaps taps;
  if (in_size == out_size) {
    taps.identity = true;
    return taps;
  }
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double support = scale >= 1.0 ? scale : 1.0;  // bilinear: interp_size 2
  taps.max_taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  std::vector<double> w(static_cast<size_t>(taps.max_taps));
  int64_t first = 0;
  int64_t count = 0;
  double wt_max = 0.0;
  // Over the whole axis: the precision depends on the largest weight of any output index.
  for (int64_t i = 0; i < out_size; ++i) {
    wt_max = std::max(wt_max,
                      TapsOf(i, in_size, scale, support, taps.max_taps, w.data(), &first, &count));
  }
  for (taps.precision = 0; taps.precision < 22; ++taps.precision) {
    const int next = static_cast<int>(0.5 + wt_max * (1 << (taps.precision + 1)));
    if (next >= (1 << 15)) break;
  }
  taps.first.resize(static_cast<size_t>(n));
  taps.count.resize(static_cast<size_t>(n));
  taps.weights.resize(static_cast<size_t>(n * taps.max_taps));
  for (int64_t k = 0; k < n; ++k) {
    TapsOf(begin + k, in_size, scale, support, taps.max_taps, w.data(), &first, &count);
    taps.first[static_cast<size_t>(k)] = first;
    taps.count[static_cast<size_t>(k)] = count;
    for (int64_t j = 0; j < taps.max_taps; ++j) {
      const double v = w[static_cast<size_t>(j)] * (1 << taps.precision);
      taps.weights[static_cast<size_t>(k * taps.max_taps + j)] =
          static_cast<int16_t>(v < 0 ? static_cast<int>(-0.5 + v) : static_cast<int>(0.5 + v));
    }
  }
  return taps;
}

// One output value: the taps' weighted sum, rounded and clamped as torch's uint8 kernels do.
uint8_t Convolve(const uint8_t* src, int64_t stride, const AxisTaps& taps, int64_t k) {
  const int32_t* w = taps.weights.data() + k * taps.max_taps;
  const int64_t count = taps.count[static_cast<size_t>(k)];
  int32_t sum = int32_t{1} << (taps.precision - 1);
  for (int64_t j = 0; j < count; ++j) sum += static_cast<int32_t>(src[j * stride]) * w[j];
  sum >>= taps.precision;
  return static_cast<uint8_t>(std::clamp(sum, int32_t{0}, int32_t{255}));
}

}  // namespace

at::Tensor ResizeWindow(const RgbImage& image, int out_h, int out_w, const CropBox& window) {
  const AxisTaps horizontal = PlanAxis(image.width, out_w, window.left, window.width);
  const AxisTaps vertical = PlanAxis(image.height, out_h, window.top, window.height);
  // The input rows the vertical pass reads (those of the window itself when it is skipped).
  int64_t row_begin = window.top;
  int64_t row_end = window.top + window.height;
  if (!vertical.identity) {
    row_begin = image.height;
    row_end = 0;
    for (int64_t k = 0; k < window.height; ++k) {
      if (vertical.count[static_cast<size_t>(k)] == 0) continue;
      row_begin = std::min(row_begin, vertical.first[static_cast<size_t>(k)]);
      row_end = std::max(
          row_end, vertical.first[static_cast<size_t>(k)] + vertical.count[static_cast<size_t>(k)]);
    }
    row_end = std::max(row_end, row_begin);
  }
  // Horizontal pass over those rows, window columns only: [rows, window.width, 3] uint8.
  const int64_t rows = row_end - row_begin;
  std::vector<uint8_t> line(static_cast<size_t>(rows * window.width * 3));
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* src = image.pixels.data() + (row_begin + r) * image.width * 3;
    uint8_t* dst = line.data() + r * window.width * 3;
    for (int64_t x = 0; x < window.width; ++x) {
      for (int c = 0; c < 3; ++c) {
        dst[x * 3 + c] = horizontal.identity
                             ? src[(window.left + x) * 3 + c]
                             : Convolve(src + horizontal.first[static_cast<size_t>(x)] * 3 + c, 3,
                                        horizontal, x);
      }
    }
  }
  at::Tensor out = at::empty({1, 3, window.height, window.width}, at::TensorOptions(at::kByte));
  uint8_t* o = out.data_ptr<uint8_t>();
  const int64_t plane = int64_t{window.height} * window.width;
  const int64_t line_stride = int64_t{window.width} * 3;
  for (int64_t y = 0; y < window.height; ++y) {
    for (int64_t x = 0; x < window.width; ++x) {
      for (int c = 0; c < 3; ++c) {
        uint8_t v = 0;
        if (vertical.identity) {
          v = line[static_cast<size_t>(y * line_stride + x * 3 + c)];
        } else {
          const int64_t first = vertical.first[static_cast<size_t>(y)] - row_begin;
          v = Convolve(line.data() + first * line_stride + x * 3 + c, line_stride, vertical, y);
        }
        o[c * plane + y * window.width + x] = v;
      }
    }
  }
  return out;
}

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
  return ToNormalizedFloat(ResizeWindow(image, h, w, CropBox{top, left, size, size}),
                           normalization);
}

}  // namespace ddp::data
