#include "trainer/data/in_memory_dataset.h"

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ddp::data {

absl::Status ValidateNormalization(const Normalization& normalization, int64_t channels) {
  if (normalization.mean.size() != normalization.std.size() && normalization.mean.size() != 1 &&
      normalization.std.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("normalization has ", normalization.mean.size(),
                                                   " means but ", normalization.std.size(),
                                                   " standard deviations"));
  }
  for (const auto* values : {&normalization.mean, &normalization.std}) {
    const auto n = static_cast<int64_t>(values->size());
    if (n > 1 && n != channels) {
      return absl::InvalidArgumentError(
          absl::StrCat("normalization has ", n, " per-channel values but the images have ",
                       channels, " channel", channels == 1 ? "" : "s"));
    }
  }
  for (float s : normalization.std) {
    if (!(s > 0)) return absl::InvalidArgumentError("normalization std must be positive");
  }
  return absl::OkStatus();
}

std::vector<float> ExpandPerChannel(const std::vector<float>& values, int64_t channels,
                                    float fallback) {
  if (values.empty()) return std::vector<float>(static_cast<size_t>(channels), fallback);
  if (values.size() == 1) return std::vector<float>(static_cast<size_t>(channels), values[0]);
  return values;
}

absl::StatusOr<std::unique_ptr<InMemoryDataset>> InMemoryDataset::Create(
    RawImageSet set, int64_t num_classes, const Normalization& normalization,
    std::string description) {
  if (absl::Status s = ValidateNormalization(normalization, set.channels); !s.ok()) return s;
  if (static_cast<int64_t>(set.labels.size()) != set.count ||
      static_cast<int64_t>(set.pixels.size()) !=
          set.count * set.channels * set.height * set.width) {
    return absl::InternalError(absl::StrCat(description, ": inconsistent image set"));
  }
  at::Tensor images =
      at::empty({set.count, set.channels, set.height, set.width}, at::TensorOptions(at::kByte));
  std::memcpy(images.data_ptr<uint8_t>(), set.pixels.data(), set.pixels.size());
  at::Tensor labels = at::empty({set.count}, at::TensorOptions(at::kLong));
  std::memcpy(labels.data_ptr<int64_t>(), set.labels.data(), set.labels.size() * sizeof(int64_t));

  const std::vector<float> mean = ExpandPerChannel(normalization.mean, set.channels, 0.0f);
  const std::vector<float> stddev = ExpandPerChannel(normalization.std, set.channels, 1.0f);
  // (x / 255 - mean) / std as the recipe writes it (three float operations, each rounded):
  // x * (1 / (255 std)) - mean / std would differ in the last bit for some pixel values, and a
  // one-bit difference grows over a few hundred SGD steps into visibly different weights.
  const at::Tensor levels = at::arange(256, at::TensorOptions(at::kFloat));
  std::vector<at::Tensor> rows;
  for (int64_t c = 0; c < set.channels; ++c) {
    rows.push_back(levels.div(255.0)
                       .sub(static_cast<double>(mean[static_cast<size_t>(c)]))
                       .div(static_cast<double>(stddev[static_cast<size_t>(c)])));
  }
  return std::unique_ptr<InMemoryDataset>(new InMemoryDataset(std::move(images), std::move(labels),
                                                              at::stack(rows).contiguous(),
                                                              num_classes, std::move(description)));
}

InMemoryDataset::InMemoryDataset(at::Tensor images, at::Tensor labels, at::Tensor table,
                                 int64_t num_classes, std::string description)
    : images_(std::move(images)),
      labels_(std::move(labels)),
      table_(std::move(table)),
      num_classes_(num_classes),
      description_(std::move(description)) {}

std::vector<int64_t> InMemoryDataset::sample_shape() const {
  return {images_.size(1), images_.size(2), images_.size(3)};
}

at::Tensor InMemoryDataset::Normalize(const at::Tensor& uint8_images) const {
  // One pass: each pixel is looked up in its channel's table.
  const at::Tensor in = uint8_images.contiguous();
  at::Tensor out = at::empty(in.sizes(), at::TensorOptions(at::kFloat));
  const int64_t channels = table_.size(0);
  const int64_t plane = in.size(-1) * in.size(-2);
  const int64_t planes = plane == 0 ? 0 : in.numel() / plane;
  const uint8_t* src = in.data_ptr<uint8_t>();
  float* dst = out.data_ptr<float>();
  const float* table = table_.data_ptr<float>();
  for (int64_t p = 0; p < planes; ++p) {
    const float* t = table + (p % channels) * 256;
    for (int64_t i = 0; i < plane; ++i) dst[i] = t[src[i]];
    src += plane;
    dst += plane;
  }
  return out;
}

absl::StatusOr<Example> InMemoryDataset::Get(int64_t index, int64_t /*epoch*/) const {
  if (index < 0 || index >= size()) {
    return absl::OutOfRangeError(
        absl::StrCat(description_, ": index ", index, " out of range [0, ", size(), ")"));
  }
  return Example{Normalize(images_[index]), labels_.data_ptr<int64_t>()[index]};
}

absl::StatusOr<Batch> InMemoryDataset::GetBatch(absl::Span<const int64_t> indices,
                                                int64_t /*epoch*/) const {
  const int64_t n = size();
  for (int64_t index : indices) {
    if (index < 0 || index >= n) {
      return absl::OutOfRangeError(
          absl::StrCat(description_, ": index ", index, " out of range [0, ", n, ")"));
    }
  }
  at::Tensor idx = at::empty({static_cast<int64_t>(indices.size())}, at::TensorOptions(at::kLong));
  std::memcpy(idx.data_ptr<int64_t>(), indices.data(), indices.size() * sizeof(int64_t));
  return Batch{Normalize(images_.index_select(0, idx)), labels_.index_select(0, idx)};
}

}  // namespace ddp::data
