// A dataset held entirely in memory as uint8 images (MNIST, Fashion-MNIST, CIFAR-10), normalized
// on the fly. GetBatch gathers a whole batch with one index_select and normalizes it in one
// vectorized pass, which is far faster than stacking single examples.
//
// No augmentation: Get/GetBatch ignore the epoch.
//
// Thread safety: immutable after construction; all methods may be called concurrently.
#ifndef SLURM_DDP_TRAINER_DATA_IN_MEMORY_DATASET_H_
#define SLURM_DDP_TRAINER_DATA_IN_MEMORY_DATASET_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/data/dataset.h"
#include "trainer/data/image_files.h"

namespace ddp::data {

class InMemoryDataset : public Dataset {
 public:
  // `normalization` is empty (images scaled to [0,1] only) or has 1 or `set.channels` entries.
  static absl::StatusOr<std::unique_ptr<InMemoryDataset>> Create(RawImageSet set,
                                                                 int64_t num_classes,
                                                                 const Normalization& normalization,
                                                                 std::string description);

  int64_t size() const override { return labels_.size(0); }
  std::vector<int64_t> sample_shape() const override;
  int64_t num_classes() const override { return num_classes_; }
  std::string description() const override { return description_; }
  absl::StatusOr<Example> Get(int64_t index, int64_t epoch) const override;
  absl::StatusOr<Batch> GetBatch(absl::Span<const int64_t> indices, int64_t epoch) const override;

  // The stored images, [N,C,H,W] uint8, and labels, [N] int64 (for tests).
  const at::Tensor& images() const { return images_; }
  const at::Tensor& labels() const { return labels_; }

 private:
  InMemoryDataset(at::Tensor images, at::Tensor labels, at::Tensor table, int64_t num_classes,
                  std::string description);
  // [..., C, H, W] uint8 -> float, each pixel through its channel's table.
  at::Tensor Normalize(const at::Tensor& uint8_images) const;

  at::Tensor images_;  // [N,C,H,W] uint8
  at::Tensor labels_;  // [N] int64
  // [C,256] float: (v / 255 - mean) / std for every pixel value v, computed with the same float
  // operations as the Python recipe's transform, so the inputs are bit for bit the same.
  at::Tensor table_;
  int64_t num_classes_;
  std::string description_;
};

// Checks a normalization against a channel count and expands it to per-channel (scale, shift)
// such that normalized = pixel_in_0_1 * scale + shift. Shared by the datasets.
absl::Status ValidateNormalization(const Normalization& normalization, int64_t channels);
std::vector<float> ExpandPerChannel(const std::vector<float>& values, int64_t channels,
                                    float fallback);

}  // namespace ddp::data

#endif  // SLURM_DDP_TRAINER_DATA_IN_MEMORY_DATASET_H_
