// The GPU JPEG pipeline for `imagefolder` data (`--data-pipeline gpu`): one epoch's batches of an
// ImageFolderDataset, decoded by nvJPEG (gpu_jpeg_decoder.h) and transformed on the GPU
// (tensor_transforms.h: the same crops and flips as the CPU pipeline, from the same per-sample
// random streams), delivered as device tensors in index order.
//
// Three stages overlap, each bounded to `prefetch` batches ahead of the consumer:
//   reader threads   read a batch's files into one page-locked host buffer and parse the JPEG
//                    headers (sizes for the output buffers and the crop plan);
//   decode thread    nvJPEG batched decode on its own CUDA stream, then crop/resize/flip/
//                    normalize on that stream, then records an event;
//   Next()           (the training thread) makes its current stream wait for that event: no host
//                    synchronization, so decoding batch k+1 runs while the model trains on k.
//
// Thread safety: Next() and the accessors for one consumer thread; the destructor stops and joins
// the stages (each finishes at most the batch it holds).
#ifndef SLURM_DDP_TRAINER_DATA_GPU_JPEG_LOADER_H_
#define SLURM_DDP_TRAINER_DATA_GPU_JPEG_LOADER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/data/batch_source.h"
#include "trainer/data/gpu_jpeg_decoder.h"
#include "trainer/data/image_folder_dataset.h"

namespace ddp::data {

struct GpuJpegLoaderOptions {
  int64_t batch_size = 64;
  bool drop_last = false;
  int64_t epoch = 0;     // augmentation stream (as Dataset::Get)
  int read_threads = 4;  // file reading and header parsing
  int prefetch = 3;      // batches read / decoded ahead of the consumer
};

class GpuJpegLoader : public BatchSource {
 public:
  // `dataset` and `decoder` must outlive the loader. Errors: bad options, no CUDA in this build.
  static absl::StatusOr<std::unique_ptr<GpuJpegLoader>> Create(const ImageFolderDataset& dataset,
                                                               GpuJpegDecoder& decoder,
                                                               std::vector<int64_t> indices,
                                                               GpuJpegLoaderOptions options);
  ~GpuJpegLoader() override;

  absl::StatusOr<std::optional<Batch>> Next() override;
  int64_t num_batches() const override;
  absl::Duration total_wait() const override;
  absl::Duration last_wait() const override;

 private:
  struct Impl;
  explicit GpuJpegLoader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddp::data

#endif  // SLURM_DDP_TRAINER_DATA_GPU_JPEG_LOADER_H_
