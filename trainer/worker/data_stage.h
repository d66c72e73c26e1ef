// A worker's data stage: the training and test splits named by --data (with --seed and
// --normalize), open for the whole run. Loaders over them are made per epoch by the loop.
//
// Thread safety: the datasets are read-only once open; loaders may read them from their threads.
#ifndef SLURM_DDP_TRAINER_WORKER_DATA_STAGE_H_
#define SLURM_DDP_TRAINER_WORKER_DATA_STAGE_H_

#include <utility>

#include "absl/status/statusor.h"
#include "trainer/app/config.h"
#include "trainer/data/data_spec.h"
#include "trainer/data/dataset.h"

namespace ddp {

class DataStage {
 public:
  // Errors name the bad flag value, or the missing or corrupt file.
  static absl::StatusOr<DataStage> Open(const TrainerConfig& config);
  explicit DataStage(data::DatasetPair datasets) : datasets_(std::move(datasets)) {}

  const data::Dataset& train() const { return *datasets_.train; }
  const data::Dataset& test() const { return *datasets_.test; }

 private:
  data::DatasetPair datasets_;
};

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_WORKER_DATA_STAGE_H_
