#include "trainer/data/synthetic_dataset.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "trainer/data/in_memory_dataset.h"
#include "trainer/data/sample_rng.h"

namespace ddp::data {
namespace {

constexpr uint64_t kSplitSalt = 0x5851F42D4C957F2DULL;
constexpr uint64_t kPatternSalt = 0x2545F4914F6CDD1DULL;
constexpr int64_t kMaxPixels = int64_t{1} << 26;

}  // namespace

absl::StatusOr<std::unique_ptr<SyntheticDataset>> SyntheticDataset::Create(Options options) {
  if (options.size < 0 || options.channels <= 0 || options.height <= 0 || options.width <= 0 ||
      options.num_classes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "synthetic data: size must be >= 0 and channels, height, width, classes positive (got ",
        options.size, "x", options.channels, "x", options.height, "x", options.width, ", ",
        options.num_classes, " classes)"));
  }
  if (options.channels * options.height * options.width > kMaxPixels) {
    return absl::InvalidArgumentError("synthetic data: image too large");
  }
  RETURN_IF_ERROR(ValidateNormalization(options.normalization, options.channels));
  return std::unique_ptr<SyntheticDataset>(new SyntheticDataset(std::move(options)));
}

SyntheticDataset::SyntheticDataset(Options options) : options_(std::move(options)) {
  const std::vector<float> mean =
      ExpandPerChannel(options_.normalization.mean, options_.channels, 0);
  const std::vector<float> stddev =
      ExpandPerChannel(options_.normalization.std, options_.channels, 1);
  for (size_t c = 0; c < mean.size(); ++c) {
    scale_.push_back(1.0f / stddev[c]);
    shift_.push_back(-mean[c] / stddev[c]);
  }
}

std::string SyntheticDataset::description() const {
  return absl::StrCat("synthetic ", options_.split == 0 ? "train" : "test", " (", options_.size,
                      " images ", options_.channels, "x", options_.height, "x", options_.width,
                      ", ", options_.num_classes, " classes)");
}

int64_t SyntheticDataset::Fill(int64_t index, float* out) const {
  SampleRng rng(options_.seed ^ (kSplitSalt * static_cast<uint64_t>(options_.split + 1)), 0, index);
  const int64_t label = rng.UniformInt(0, options_.num_classes);
  // The class pattern: one bit per pixel from a stream that depends on (seed, label) only.
  SampleRng pattern(options_.seed ^ kPatternSalt, label, 0);
  const int64_t plane = options_.height * options_.width;
  uint64_t noise_bits = 0;
  uint64_t pattern_bits = 0;
  int64_t i = 0;
  for (int64_t c = 0; c < options_.channels; ++c) {
    const float scale = scale_[static_cast<size_t>(c)];
    const float shift = shift_[static_cast<size_t>(c)];
    for (int64_t p = 0; p < plane; ++p, ++i) {
      if (i % 4 == 0) noise_bits = rng.NextU64();
      if (i % 64 == 0) pattern_bits = pattern.NextU64();
      const float noise = static_cast<float>(noise_bits & 0xFFFF) * (0.5f / 65536.0f);
      noise_bits >>= 16;
      const float bit = (pattern_bits & 1) ? 0.5f : 0.0f;
      pattern_bits >>= 1;
      out[i] = (noise + bit) * scale + shift;
    }
  }
  return label;
}

absl::StatusOr<Example> SyntheticDataset::Get(int64_t index, int64_t /*epoch*/) const {
  if (index < 0 || index >= size()) {
    return absl::OutOfRangeError(
        absl::StrCat(description(), ": index ", index, " out of range [0, ", size(), ")"));
  }
  at::Tensor image = at::empty({options_.channels, options_.height, options_.width},
                               at::TensorOptions(at::kFloat));
  const int64_t label = Fill(index, image.data_ptr<float>());
  return Example{std::move(image), label};
}

absl::StatusOr<Batch> SyntheticDataset::GetBatch(absl::Span<const int64_t> indices,
                                                 int64_t /*epoch*/) const {
  const auto n = static_cast<int64_t>(indices.size());
  at::Tensor images = at::empty({n, options_.channels, options_.height, options_.width},
                                at::TensorOptions(at::kFloat));
  at::Tensor labels = at::empty({n}, at::TensorOptions(at::kLong));
  const int64_t stride = options_.channels * options_.height * options_.width;
  for (int64_t b = 0; b < n; ++b) {
    const int64_t index = indices[static_cast<size_t>(b)];
    if (index < 0 || index >= size()) {
      return absl::OutOfRangeError(
          absl::StrCat(description(), ": index ", index, " out of range [0, ", size(), ")"));
    }
    labels.data_ptr<int64_t>()[b] = Fill(index, images.data_ptr<float>() + b * stride);
  }
  return Batch{std::move(images), std::move(labels)};
}

}  // namespace ddp::data
