// Batched JPEG decoding on the GPU with nvJPEG (nvjpeg_library.h): the hardware decoder engines
// where the GPU has them (A100, H100, H200), else nvJPEG's GPU-assisted hybrid backend. Images the
// chosen backend refuses (progressive or CMYK files, unusual subsampling) are decoded on the CPU
// with libjpeg-turbo and uploaded, so every JPEG the CPU pipeline reads also works here.
//
// One decoder serves one GPU and lives as long as the worker (creating nvJPEG handles is slow);
// the GPU JPEG loader of each epoch borrows it.
//
// Thread safety: DecodeBatch() is called by one thread at a time (the loader's decode thread).
#ifndef SLURM_DDP_TRAINER_DATA_GPU_JPEG_DECODER_H_
#define SLURM_DDP_TRAINER_DATA_GPU_JPEG_DECODER_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ddp::data {

// A JPEG file's bytes (in host memory, ideally pinned) and its size (ReadJpegInfo).
struct EncodedJpeg {
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::string name;  // the path, for errors
  int width = 0;
  int height = 0;
};

struct GpuJpegDecoderStats {
  int64_t gpu_images = 0;  // decoded by nvJPEG
  int64_t cpu_images = 0;  // refused by the backend, decoded on the CPU
};

class GpuJpegDecoder {
 public:
  // Loads nvJPEG and creates its handle for `device_index`. Errors: no CUDA in this build, no
  // such device, nvJPEG missing or failing to start.
  static absl::StatusOr<std::unique_ptr<GpuJpegDecoder>> Create(int device_index);
  ~GpuJpegDecoder();
  GpuJpegDecoder(const GpuJpegDecoder&) = delete;
  GpuJpegDecoder& operator=(const GpuJpegDecoder&) = delete;

  // Decodes every image to a [H, W, 3] uint8 tensor on the device, enqueued on the current CUDA
  // stream. The bytes must stay valid until the stream has consumed them (synchronize, or keep
  // the buffer until an event recorded after this call has completed). DataLoss names a file that
  // neither nvJPEG nor libjpeg can decode, or whose size claims more than kMaxJpegPixels pixels
  // (CheckJpegPixels, before anything is allocated for it).
  absl::StatusOr<std::vector<at::Tensor>> DecodeBatch(const std::vector<EncodedJpeg>& images);

  // "hardware (7 engines)" or "gpu-hybrid".
  const std::string& backend_name() const { return backend_name_; }
  int device_index() const { return device_index_; }
  GpuJpegDecoderStats stats() const { return stats_; }

 private:
  struct Impl;
  GpuJpegDecoder(std::unique_ptr<Impl> impl, std::string backend_name, int device_index);

  std::unique_ptr<Impl> impl_;
  std::string backend_name_;
  int device_index_;
  GpuJpegDecoderStats stats_;
};

}  // namespace ddp::data

#endif  // SLURM_DDP_TRAINER_DATA_GPU_JPEG_DECODER_H_
