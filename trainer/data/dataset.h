// The dataset interface the trainer's loader reads from, and the types it produces.
//
// A Dataset maps an index in [0, size()) to one example: an image tensor (float32, CHW,
// already normalized) and an int64 label. Random augmentation, where a dataset has any, is a pure
// function of (the dataset's seed, epoch, index), so a run is reproducible regardless of which
// thread loads which sample.
//
// Thread safety: every const method may be called from several threads at once (the Loader's
// workers do). Implementations keep no mutable state after construction.
#ifndef SLURM_DDP_TRAINER_DATA_DATASET_H_
#define SLURM_DDP_TRAINER_DATA_DATASET_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ddp::data {

// One sample: image [C,H,W] float32 (normalized), label in [0, num_classes).
struct Example {
  at::Tensor image;
  int64_t label = 0;
};

// A batch: images [B,C,H,W] float32, labels [B] int64.
struct Batch {
  at::Tensor images;
  at::Tensor labels;
};

// Per-channel normalization applied to images scaled to [0,1]: (x - mean[c]) / std[c].
// Empty vectors mean "no normalization"; one entry applies to every channel.
struct Normalization {
  std::vector<float> mean;
  std::vector<float> std;

  bool empty() const { return mean.empty(); }
};

class Dataset {
 public:
  virtual ~Dataset() = default;

  // Number of examples.
  virtual int64_t size() const = 0;
  // Shape of one image: {C, H, W}. For datasets whose images vary before transforms, the shape
  // after the (eval) transform.
  virtual std::vector<int64_t> sample_shape() const = 0;
  virtual int64_t num_classes() const = 0;
  // A short description for logs, e.g. "fashion-mnist train (60000 images)".
  virtual std::string description() const = 0;

  // The example at `index` for `epoch` (epoch only matters for random augmentation).
  // Errors: OutOfRange for a bad index; DataLoss/NotFound naming the file for unreadable data.
  virtual absl::StatusOr<Example> Get(int64_t index, int64_t epoch) const = 0;

  // The examples at `indices`, in that order, stacked into a batch. The default calls Get() for
  // each index; in-memory datasets override it with a vectorized gather.
  virtual absl::StatusOr<Batch> GetBatch(absl::Span<const int64_t> indices, int64_t epoch) const;
};

}  // namespace ddp::data

#endif  // SLURM_DDP_TRAINER_DATA_DATASET_H_
