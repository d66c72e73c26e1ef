// nvJPEG, loaded at run time. The GPU JPEG pipeline (gpu_jpeg_loader.h) decodes through these
// entry points; the library (libnvjpeg.so.13, from NVIDIA's `nvidia-nvjpeg` wheel or a CUDA
// toolkit) is found with dlopen, so ddp-trainer builds and runs without it and only
// `--data-pipeline gpu` needs it. The declarations below are the subset of nvjpeg.h (CUDA 13) that
// we call; the C ABI of these entry points has been stable since CUDA 10.
//
// Search order: $DDP_NVJPEG_LIBRARY (a full path), then the dynamic loader's own search
// (LD_LIBRARY_PATH, the cache) for libnvjpeg.so.13 and libnvjpeg.so.
//
// Thread safety: Load() is thread-safe and loads once; the returned table is immutable. nvJPEG's
// own rules apply to the calls (a handle is shared; a decode state belongs to one thread).
#ifndef SLURM_DDP_TRAINER_DATA_NVJPEG_LIBRARY_H_
#define SLURM_DDP_TRAINER_DATA_NVJPEG_LIBRARY_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace ddp::data::nvjpeg {

// --- the subset of nvjpeg.h we use (values as in CUDA 13's nvjpeg.h) ---------------------------
using Status = int;  // nvjpegStatus_t
inline constexpr Status kSuccess = 0;
inline constexpr Status kJpegNotSupported = 4;
inline constexpr Status kArchMismatch = 7;

using Backend = int;  // nvjpegBackend_t
inline constexpr Backend kBackendDefault = 0;
inline constexpr Backend kBackendGpuHybrid = 2;
inline constexpr Backend kBackendHardware = 3;

using OutputFormat = int;                       // nvjpegOutputFormat_t
inline constexpr OutputFormat kOutputRgbi = 5;  // interleaved RGB, HWC

using Subsampling = int;  // nvjpegChromaSubsampling_t
inline constexpr Subsampling kCssGray = 6;

inline constexpr int kMaxComponent = 4;  // NVJPEG_MAX_COMPONENT

struct Image {  // nvjpegImage_t
  unsigned char* channel[kMaxComponent];
  size_t pitch[kMaxComponent];
};

using Handle = struct HandleOpaque*;          // nvjpegHandle_t
using State = struct StateOpaque*;            // nvjpegJpegState_t
using JpegStream = struct JpegStreamOpaque*;  // nvjpegJpegStream_t
using CudaStream = void*;                     // cudaStream_t

struct Library {
  Status (*CreateEx)(Backend, void* dev_allocator, void* pinned_allocator, unsigned flags,
                     Handle* handle);
  Status (*Destroy)(Handle);
  Status (*JpegStateCreate)(Handle, State*);
  Status (*JpegStateDestroy)(State);
  Status (*GetImageInfo)(Handle, const unsigned char* data, size_t length, int* components,
                         Subsampling* subsampling, int* widths, int* heights);
  Status (*Decode)(Handle, State, const unsigned char* data, size_t length, OutputFormat,
                   Image* destination, CudaStream stream);
  Status (*DecodeBatchedInitialize)(Handle, State, int batch_size, int max_cpu_threads,
                                    OutputFormat);
  Status (*DecodeBatched)(Handle, State, const unsigned char* const* data, const size_t* lengths,
                          Image* destinations, CudaStream stream);
  Status (*JpegStreamCreate)(Handle, JpegStream*);
  Status (*JpegStreamDestroy)(JpegStream);
  Status (*JpegStreamParseHeader)(Handle, const unsigned char* data, size_t length, JpegStream);
  Status (*DecodeBatchedSupported)(Handle, JpegStream, int* is_supported);  // 0: supported
  Status (*GetHardwareDecoderInfo)(Handle, unsigned* engines, unsigned* cores_per_engine);

  std::string path;  // where it was loaded from
};

// The library, loaded on first use. Errors (FailedPrecondition) say where it was looked for and
// how to provide it.
absl::StatusOr<const Library*> Load();

// "NVJPEG_STATUS_BAD_JPEG (3)" for logs and errors.
std::string StatusName(Status status);

}  // namespace ddp::data::nvjpeg

#endif  // SLURM_DDP_TRAINER_DATA_NVJPEG_LIBRARY_H_
