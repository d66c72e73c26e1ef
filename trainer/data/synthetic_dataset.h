// Deterministic random images: nothing is stored, any index is regenerated on demand from
// (seed, split, index). Pixel values lie in [0, 1): half uniform noise, half a fixed random
// binary pattern of the sample's class, so models can learn it (useful for demos and throughput
// runs). The class patterns depend only on `seed`, so the train and test splits share them.
//
// Thread safety: immutable; all methods may be called concurrently.
#ifndef SLURM_DDP_TRAINER_DATA_SYNTHETIC_DATASET_H_
#define SLURM_DDP_TRAINER_DATA_SYNTHETIC_DATASET_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/data/dataset.h"

namespace ddp::data {

class SyntheticDataset : public Dataset {
 public:
  struct Options {
    int64_t size = 1024;
    int64_t channels = 3;
    int64_t height = 32;
    int64_t width = 32;
    int64_t num_classes = 10;
    uint64_t seed = 0;
    int split = 0;  // 0 train, 1 test: independent samples over the same class patterns
    Normalization normalization;  // applied to the [0,1) values; empty for none
  };

  static absl::StatusOr<std::unique_ptr<SyntheticDataset>> Create(Options options);

  int64_t size() const override { return options_.size; }
  std::vector<int64_t> sample_shape() const override {
    return {options_.channels, options_.height, options_.width};
  }
  int64_t num_classes() const override { return options_.num_classes; }
  std::string description() const override;
  absl::StatusOr<Example> Get(int64_t index, int64_t epoch) const override;
  absl::StatusOr<Batch> GetBatch(absl::Span<const int64_t> indices, int64_t epoch) const override;

 private:
  explicit SyntheticDataset(Options options);
  // Writes sample `index` into `out` (channels*height*width floats); returns its label.
  int64_t Fill(int64_t index, float* out) const;

  Options options_;
  std::vector<float> scale_;  // per channel
  std::vector<float> shift_;
};

}  // namespace ddp::data

#endif  // SLURM_DDP_TRAINER_DATA_SYNTHETIC_DATASET_H_
