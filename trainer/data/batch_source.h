// Where the training loop takes its batches from: the CPU loader (loader.h: dataset reads and
// transforms on host threads) or the GPU JPEG pipeline (gpu_jpeg_loader.h: nvJPEG decode and
// transforms on the device). Both deliver one epoch's batches in the order of the given indices.
//
// Thread safety: one consumer thread calls Next() and the accessors.
#ifndef SLURM_DDP_TRAINER_DATA_BATCH_SOURCE_H_
#define SLURM_DDP_TRAINER_DATA_BATCH_SOURCE_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trainer/data/dataset.h"

namespace ddp::data {

class BatchSource {
 public:
  virtual ~BatchSource() = default;

  // The next batch in order; std::nullopt after the last one. An error is sticky.
  virtual absl::StatusOr<std::optional<Batch>> Next() = 0;
  virtual int64_t num_batches() const = 0;
  // Time Next() spent waiting for data, in total and in the last call.
  virtual absl::Duration total_wait() const = 0;
  virtual absl::Duration last_wait() const = 0;
};

}  // namespace ddp::data

#endif  // SLURM_DDP_TRAINER_DATA_BATCH_SOURCE_H_
