#include "trainer/data/gpu_jpeg_decoder.h"

#include <cstdio>
#include <cstring>
#include <exception>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "trainer/data/jpeg_codec.h"
#include "trainer/data/nvjpeg_library.h"

#ifdef DDP_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace ddp::data {

struct GpuJpegDecoder::Impl {
  const nvjpeg::Library* lib = nullptr;
  nvjpeg::Handle handle = nullptr;
  nvjpeg::State state = nullptr;
  nvjpeg::JpegStream parsed = nullptr;  // scratch for the hardware backend's support check
  bool hardware = false;
  int initialized_batch = -1;  // DecodeBatchedInitialize'd for this many images

  ~Impl() {
    if (lib == nullptr) return;
    if (parsed != nullptr) lib->JpegStreamDestroy(parsed);
    if (state != nullptr) lib->JpegStateDestroy(state);
    if (handle != nullptr) lib->Destroy(handle);
  }
};

GpuJpegDecoder::GpuJpegDecoder(std::unique_ptr<Impl> impl, std::string backend_name,
                               int device_index)
    : impl_(std::move(impl)), backend_name_(std::move(backend_name)), device_index_(device_index) {}

GpuJpegDecoder::~GpuJpegDecoder() = default;

#ifndef DDP_WITH_CUDA

absl::StatusOr<std::unique_ptr<GpuJpegDecoder>> GpuJpegDecoder::Create(int) {
  return absl::FailedPreconditionError(
      "the GPU JPEG pipeline needs a CUDA build of LibTorch; this build has none");
}

absl::StatusOr<std::vector<at::Tensor>> GpuJpegDecoder::DecodeBatch(
    const std::vector<EncodedJpeg>&) {
  return absl::FailedPreconditionError("no CUDA in this build");
}

#else

namespace {

absl::Status NvjpegError(const std::string& what, nvjpeg::Status status) {
  return absl::InternalError(absl::StrCat("nvJPEG ", what, ": ", nvjpeg::StatusName(status)));
}

// libjpeg-turbo on the host, then an asynchronous upload from page-locked memory.
absl::StatusOr<at::Tensor> DecodeOnCpu(const EncodedJpeg& image, int device_index) {
  absl::StatusOr<RgbImage> rgb = DecodeJpeg(
      std::string_view(reinterpret_cast<const char*>(image.data), image.size), image.name);
  if (!rgb.ok()) return rgb.status();
  at::Tensor pinned =
      at::empty({rgb->height, rgb->width, 3}, at::TensorOptions(at::kByte).pinned_memory(true));
  std::memcpy(pinned.data_ptr(), rgb->pixels.data(), rgb->pixels.size());
  return pinned.to(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device_index)),
                   /*non_blocking=*/true);
}

}  // namespace

absl::StatusOr<std::unique_ptr<GpuJpegDecoder>> GpuJpegDecoder::Create(int device_index) {
  const int devices = static_cast<int>(c10::cuda::device_count());
  if (device_index < 0 || device_index >= devices) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU JPEG decoder: CUDA device ", device_index, " not visible (", devices, " device(s))"));
  }
  auto lib = nvjpeg::Load();
  if (!lib.ok()) return lib.status();
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_index));
  auto impl = std::make_unique<Impl>();
  impl->lib = *lib;
  std::string backend;
  nvjpeg::Status st =
      (*lib)->CreateEx(nvjpeg::kBackendHardware, nullptr, nullptr, 0, &impl->handle);
  if (st == nvjpeg::kSuccess) {
    impl->hardware = true;
    unsigned engines = 0;
    unsigned cores = 0;
    if ((*lib)->GetHardwareDecoderInfo(impl->handle, &engines, &cores) == nvjpeg::kSuccess) {
      backend = absl::StrCat("hardware (", engines, " engine(s) x ", cores, " core(s))");
    } else {
      backend = "hardware";
    }
  } else {
    const nvjpeg::Status hw = st;
    impl->handle = nullptr;
    st = (*lib)->CreateEx(nvjpeg::kBackendGpuHybrid, nullptr, nullptr, 0, &impl->handle);
    if (st != nvjpeg::kSuccess) {
      impl->handle = nullptr;
      st = (*lib)->CreateEx(nvjpeg::kBackendDefault, nullptr, nullptr, 0, &impl->handle);
      if (st != nvjpeg::kSuccess) {
        impl->handle = nullptr;
        return NvjpegError("handle creation", st);
      }
      backend = "default";
    } else {
      backend = "gpu-hybrid";
    }
    absl::StrAppend(&backend, " (no hardware decoder: ", nvjpeg::StatusName(hw), ")");
  }
  if ((st = (*lib)->JpegStateCreate(impl->handle, &impl->state)) != nvjpeg::kSuccess) {
    impl->state = nullptr;
    return NvjpegError("state creation", st);
  }
  if ((st = (*lib)->JpegStreamCreate(impl->handle, &impl->parsed)) != nvjpeg::kSuccess) {
    impl->parsed = nullptr;
    return NvjpegError("stream creation", st);
  }
  return std::unique_ptr<GpuJpegDecoder>(
      new GpuJpegDecoder(std::move(impl), std::move(backend), device_index));
}

absl::StatusOr<std::vector<at::Tensor>> GpuJpegDecoder::DecodeBatch(
    const std::vector<EncodedJpeg>& images) {
  try {
    const auto device = static_cast<c10::DeviceIndex>(device_index_);
    c10::cuda::CUDAGuard guard(device);
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device).stream();
    const nvjpeg::Library& lib = *impl_->lib;
    std::vector<at::Tensor> out(images.size());

    // Which images the backend takes: the hardware engines decode baseline, single-scan files;
    // nvJPEG itself says which.
    std::vector<size_t> on_gpu;
    std::vector<size_t> on_cpu;
    for (size_t i = 0; i < images.size(); ++i) {
      // The size is the header's claim: checked before anything is allocated for it.
      if (absl::Status st = CheckJpegPixels(images[i].width, images[i].height, images[i].name);
          !st.ok()) {
        return st;
      }
      bool supported = true;
      if (impl_->hardware) {
        int verdict = 1;
        supported = lib.JpegStreamParseHeader(impl_->handle, images[i].data, images[i].size,
                                              impl_->parsed) == nvjpeg::kSuccess &&
                    lib.DecodeBatchedSupported(impl_->handle, impl_->parsed, &verdict) ==
                        nvjpeg::kSuccess &&
                    verdict == 0;
      }
      (supported ? on_gpu : on_cpu).push_back(i);
    }

    if (!on_gpu.empty()) {
      const int n = static_cast<int>(on_gpu.size());
      nvjpeg::Status st = nvjpeg::kSuccess;
      if (impl_->initialized_batch != n) {
        st = lib.DecodeBatchedInitialize(impl_->handle, impl_->state, n, 1, nvjpeg::kOutputRgbi);
        impl_->initialized_batch = st == nvjpeg::kSuccess ? n : -1;
      }
      std::vector<const unsigned char*> data(on_gpu.size());
      std::vector<size_t> lengths(on_gpu.size());
      std::vector<nvjpeg::Image> dest(on_gpu.size());
      for (size_t k = 0; k < on_gpu.size(); ++k) {
        const EncodedJpeg& image = images[on_gpu[k]];
        at::Tensor t = at::empty({image.height, image.width, 3},
                                 at::TensorOptions(at::kByte).device(at::kCUDA, device));
        data[k] = image.data;
        lengths[k] = image.size;
        dest[k] = nvjpeg::Image{};
        dest[k].channel[0] = t.data_ptr<uint8_t>();
        dest[k].pitch[0] = static_cast<size_t>(image.width) * 3;
        out[on_gpu[k]] = std::move(t);
      }
      if (st == nvjpeg::kSuccess) {
        st = lib.DecodeBatched(impl_->handle, impl_->state, data.data(), lengths.data(),
                               dest.data(), stream);
      }
      if (st != nvjpeg::kSuccess) {
        // A corrupt or unexpected file spoils the batch: decode it on the CPU, which names a file
        // that cannot be decoded at all. Re-initialize before the next batch.
        impl_->initialized_batch = -1;
        on_cpu.insert(on_cpu.end(), on_gpu.begin(), on_gpu.end());
        on_gpu.clear();
      }
    }
    for (size_t i : on_cpu) {
      absl::StatusOr<at::Tensor> t = DecodeOnCpu(images[i], device_index_);
      if (!t.ok()) return t.status();
      out[i] = *std::move(t);
    }
    stats_.gpu_images += static_cast<int64_t>(on_gpu.size());
    stats_.cpu_images += static_cast<int64_t>(on_cpu.size());
    return out;
  } catch (const std::exception& e) {
    const std::string what = e.what();
    return absl::InternalError(absl::StrCat("GPU JPEG decode: ", what.substr(0, what.find('\n'))));
  }
}

#endif  // DDP_WITH_CUDA

}  // namespace ddp::data
