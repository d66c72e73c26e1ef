// A worker's data stage: the training and test splits named by --data (with --seed and
// --normalize), open for the whole run, and where an epoch's batches come from: the CPU loader,
// or the GPU JPEG pipeline (nvJPEG decode and transforms on the device) for image folders when
// --data-pipeline sets it up.
//
// Thread safety: the datasets are read-only once open; loaders may read them from their threads.
// SetUpPipeline() and OpenBatches() are for the training thread.
#ifndef SLURM_DDP_TRAINER_WORKER_DATA_STAGE_H_
#define SLURM_DDP_TRAINER_WORKER_DATA_STAGE_H_

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/data/batch_source.h"
#include "trainer/data/data_spec.h"
#include "trainer/data/dataset.h"
#include "trainer/data/gpu_jpeg_decoder.h"

namespace ddp {

class DataStage {
 public:
  // What the stage is opened with (the flags of the same names).
  struct Options {
    std::string data;       // --data: a data spec (data_spec.h)
    int64_t seed = 0;       // --seed: shuffles and splits (synthetic data)
    std::string normalize;  // --normalize: MEAN,STD override; "" for the dataset's own
  };

  // Errors name the bad flag value, or the missing or corrupt file.
  static absl::StatusOr<DataStage> Open(const Options& options);
  explicit DataStage(data::DatasetPair datasets) : datasets_(std::move(datasets)) {}

  const data::Dataset& train() const { return *datasets_.train; }
  const data::Dataset& test() const { return *datasets_.test; }

  // --data-pipeline: the GPU JPEG pipeline when asked for (or, under auto, when it can run:
  // imagefolder data on a CUDA device with nvJPEG present). Returns "" or a note for rank 0's
  // log; an error only when --data-pipeline gpu cannot be honoured.
  // `data_pipeline` is auto, cpu or gpu.
  absl::StatusOr<std::string> SetUpPipeline(const std::string& data_pipeline, at::Device device);
  bool gpu_pipeline() const { return gpu_decoder_ != nullptr; }

  // `indices` of `dataset` (train() or test()) in batches: through the GPU pipeline for image
  // folders when it is set up, else the CPU loader (`workers` threads, pinned for a CUDA device).
  absl::StatusOr<std::unique_ptr<data::BatchSource>> OpenBatches(const data::Dataset& dataset,
                                                                 std::vector<int64_t> indices,
                                                                 int64_t batch_size, int64_t epoch,
                                                                 int workers,
                                                                 at::Device device) const;

 private:
  data::DatasetPair datasets_;
  std::unique_ptr<data::GpuJpegDecoder> gpu_decoder_;  // --data-pipeline gpu
};

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_WORKER_DATA_STAGE_H_
