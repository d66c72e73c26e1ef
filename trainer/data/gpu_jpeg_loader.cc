#include "trainer/data/gpu_jpeg_loader.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <exception>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "trainer/data/crop_resize.h"
#include "trainer/data/image_files.h"
#include "trainer/data/image_folder_dataset.h"
#include "trainer/data/jpeg_codec.h"
#include "trainer/data/tensor_transforms.h"

#ifdef DDP_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace ddp::data {

#ifndef DDP_WITH_CUDA

struct GpuJpegLoader::Impl {};
GpuJpegLoader::GpuJpegLoader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuJpegLoader::~GpuJpegLoader() = default;
absl::StatusOr<std::unique_ptr<GpuJpegLoader>> GpuJpegLoader::Create(const ImageFolderDataset&,
                                                                     GpuJpegDecoder&,
                                                                     std::vector<int64_t>,
                                                                     GpuJpegLoaderOptions) {
  return absl::FailedPreconditionError("the GPU JPEG pipeline needs a CUDA build of LibTorch");
}
absl::StatusOr<std::optional<Batch>> GpuJpegLoader::Next() {
  return absl::FailedPreconditionError("no CUDA in this build");
}
int64_t GpuJpegLoader::num_batches() const { return 0; }
absl::Duration GpuJpegLoader::total_wait() const { return absl::ZeroDuration(); }
absl::Duration GpuJpegLoader::last_wait() const { return absl::ZeroDuration(); }

#else

namespace {

std::string FirstLine(const std::exception& e) {
  const std::string what = e.what();
  return what.substr(0, what.find('\n'));
}

// A batch's files in one page-locked buffer, with what the decoder needs to know of each.
struct ReadBatch {
  at::Tensor bytes;  // pinned uint8: every file of the batch, back to back
  std::vector<EncodedJpeg> images;
  std::vector<TransformPlan> plans;
  at::Tensor labels;  // pinned int64
};

struct DecodedBatch {
  Batch batch;
  std::unique_ptr<c10::cuda::CUDAEvent> ready;  // recorded on the decode stream
};

}  // namespace

struct GpuJpegLoader::Impl {
  Impl(const ImageFolderDataset& d, GpuJpegDecoder& dec, std::vector<int64_t> idx,
       GpuJpegLoaderOptions o)
      : dataset(d),
        decoder(dec),
        indices(std::move(idx)),
        options(o),
        num_batches(o.drop_last
                        ? static_cast<int64_t>(indices.size()) / o.batch_size
                        : (static_cast<int64_t>(indices.size()) + o.batch_size - 1) / o.batch_size),
        prefetch(std::max(1, o.prefetch)),
        device(static_cast<c10::DeviceIndex>(dec.device_index())) {}

  absl::StatusOr<ReadBatch> Read(int64_t batch) const;
  absl::StatusOr<DecodedBatch> Decode(ReadBatch& read) const;
  void ReaderLoop();
  void DecoderLoop();

  const ImageFolderDataset& dataset;
  GpuJpegDecoder& decoder;
  const std::vector<int64_t> indices;
  const GpuJpegLoaderOptions options;
  const int64_t num_batches;
  const int prefetch;
  const c10::DeviceIndex device;

  // Consumer state.
  int64_t next = 0;
  absl::Duration total_wait;
  absl::Duration last_wait;
  std::optional<absl::Status> failed;

  absl::Mutex mu;
  bool stop ABSL_GUARDED_BY(mu) = false;
  int64_t read_claimed ABSL_GUARDED_BY(mu) = 0;  // next batch a reader takes
  int64_t decoded ABSL_GUARDED_BY(mu) = 0;       // next batch the decoder takes
  int64_t consumed ABSL_GUARDED_BY(mu) = 0;      // batches Next() returned
  // Batch k lives in slot k % prefetch of each ring.
  std::vector<std::optional<absl::StatusOr<ReadBatch>>> read_ring ABSL_GUARDED_BY(mu);
  std::vector<std::optional<absl::StatusOr<DecodedBatch>>> done_ring ABSL_GUARDED_BY(mu);

  std::vector<std::thread> threads;
};

absl::StatusOr<ReadBatch> GpuJpegLoader::Impl::Read(int64_t batch) const {
  const int64_t begin = batch * options.batch_size;
  const int64_t end = std::min(begin + options.batch_size, static_cast<int64_t>(indices.size()));
  const auto& samples = dataset.samples();
  const ImageFolderDataset::Options& d = dataset.options();
  std::vector<std::string> files;
  size_t total = 0;
  for (int64_t k = begin; k < end; ++k) {
    const int64_t index = indices[static_cast<size_t>(k)];
    if (index < 0 || index >= dataset.size()) {
      return absl::OutOfRangeError(
          absl::StrCat("index ", index, " out of range [0, ", dataset.size(), ")"));
    }
    ASSIGN_OR_RETURN(std::string bytes,
                     ReadFile(samples[static_cast<size_t>(index)].path, kMaxImageFileBytes));
    total += bytes.size();
    files.push_back(std::move(bytes));
  }
  ReadBatch out;
  try {
    out.bytes = at::empty({static_cast<int64_t>(std::max<size_t>(total, 1))},
                          at::TensorOptions(at::kByte).pinned_memory(true));
    out.labels = at::empty({end - begin}, at::TensorOptions(at::kLong).pinned_memory(true));
  } catch (const std::exception& e) {
    return absl::ResourceExhaustedError(absl::StrCat("pinned host buffer: ", FirstLine(e)));
  }
  uint8_t* base = out.bytes.data_ptr<uint8_t>();
  int64_t* labels = out.labels.data_ptr<int64_t>();
  size_t offset = 0;
  for (int64_t k = begin; k < end; ++k) {
    const int64_t index = indices[static_cast<size_t>(k)];
    const auto& sample = samples[static_cast<size_t>(index)];
    const std::string& bytes = files[static_cast<size_t>(k - begin)];
    std::memcpy(base + offset, bytes.data(), bytes.size());
    ASSIGN_OR_RETURN(const JpegInfo info, ReadJpegInfo(bytes, sample.path));
    EncodedJpeg image;
    image.data = base + offset;
    image.size = bytes.size();
    image.name = sample.path;
    image.width = info.width;
    image.height = info.height;
    out.images.push_back(std::move(image));
    if (d.transform == ImageFolderDataset::Transform::kTrain) {
      SampleRng rng(d.seed, options.epoch, index);
      out.plans.push_back(PlanTrain(info.height, info.width, d.image_size, rng));
    } else {
      out.plans.push_back(PlanEval(info.height, info.width, d.resize, d.image_size));
    }
    labels[k - begin] = sample.label;
    offset += bytes.size();
  }
  return out;
}

absl::StatusOr<DecodedBatch> GpuJpegLoader::Impl::Decode(ReadBatch& read) const {
  ASSIGN_OR_RETURN(std::vector<at::Tensor> images, decoder.DecodeBatch(read.images));
  try {
    const int64_t n = static_cast<int64_t>(images.size());
    const int64_t size = dataset.options().image_size;
    const auto on_device = at::TensorOptions().device(at::kCUDA, device);
    DecodedBatch out;
    out.batch.images = at::empty({n, 3, size, size}, on_device.dtype(at::kFloat));
#ifdef DDP_WITH_CUDA_KERNELS
    // One kernel for the whole batch; its job table goes up from page-locked memory.
    at::Tensor jobs = at::empty({n * static_cast<int64_t>(sizeof(CropResizeJob))},
                                at::TensorOptions(at::kByte).pinned_memory(true));
    auto* job = reinterpret_cast<CropResizeJob*>(jobs.data_ptr());
    for (int64_t i = 0; i < n; ++i) {
      const at::Tensor& image = images[static_cast<size_t>(i)];
      job[i] = JobOf(read.plans[static_cast<size_t>(i)], image.data_ptr<uint8_t>(),
                     static_cast<int>(image.size(0)), static_cast<int>(image.size(1)));
    }
    at::Tensor jobs_on_device = jobs.to(on_device, /*non_blocking=*/true);
    const int err = LaunchCropResize(
        reinterpret_cast<const CropResizeJob*>(jobs_on_device.data_ptr()), static_cast<int>(n),
        static_cast<int>(size), AffineOf(dataset.options().normalization),
        out.batch.images.data_ptr<float>(), c10::cuda::getCurrentCUDAStream(device).stream());
    if (err != 0) {
      return absl::InternalError(absl::StrCat("GPU transform kernel: CUDA error ", err));
    }
#else
    for (int64_t i = 0; i < n; ++i) {
      ApplyPlan(images[static_cast<size_t>(i)], read.plans[static_cast<size_t>(i)],
                out.batch.images[i]);
    }
    NormalizeBatch(out.batch.images, dataset.options().normalization);
#endif
    out.batch.labels = read.labels.to(on_device, /*non_blocking=*/true);
    out.ready = std::make_unique<c10::cuda::CUDAEvent>();
    out.ready->record(c10::cuda::getCurrentCUDAStream(device));
    return out;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("GPU transforms: ", FirstLine(e)));
  }
}

void GpuJpegLoader::Impl::ReaderLoop() {
  while (true) {
    int64_t batch = 0;
    {
      absl::MutexLock lock(&mu);
      auto can_claim = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
        return stop || read_claimed >= num_batches || read_claimed < decoded + prefetch;
      };
      mu.Await(absl::Condition(&can_claim));
      if (stop || read_claimed >= num_batches) return;
      batch = read_claimed++;
    }
    absl::StatusOr<ReadBatch> result = Read(batch);
    absl::MutexLock lock(&mu);
    read_ring[static_cast<size_t>(batch % prefetch)] = std::move(result);
  }
}

void GpuJpegLoader::Impl::DecoderLoop() {
  c10::cuda::CUDAGuard guard(device);
  c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device);
  c10::cuda::CUDAStreamGuard stream_guard(stream);
  // Page-locked file buffers stay alive until the GPU has read them (nvJPEG copies them
  // asynchronously); each is released once its batch's event has completed.
  std::deque<std::pair<std::unique_ptr<c10::cuda::CUDAEvent>, at::Tensor>> in_flight;
  for (int64_t batch = 0; batch < num_batches; ++batch) {
    absl::StatusOr<ReadBatch> read;
    {
      absl::MutexLock lock(&mu);
      auto& slot = read_ring[static_cast<size_t>(batch % prefetch)];
      auto can_decode = [this, &slot, batch]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
        return stop || (slot.has_value() && batch < consumed + prefetch);
      };
      mu.Await(absl::Condition(&can_decode));
      if (stop) return;
      read = std::move(*slot);
      slot.reset();
      decoded = batch + 1;
    }
    absl::StatusOr<DecodedBatch> result =
        read.ok() ? Decode(*read) : absl::StatusOr<DecodedBatch>(read.status());
    if (result.ok()) {
      auto retire = std::make_unique<c10::cuda::CUDAEvent>();
      retire->record(stream);
      in_flight.emplace_back(std::move(retire), read->bytes);
      while (!in_flight.empty() && (in_flight.front().first->query() ||
                                    static_cast<int>(in_flight.size()) > prefetch + 1)) {
        in_flight.front().first->synchronize();
        in_flight.pop_front();
      }
    }
    const bool failed_batch = !result.ok();
    {
      absl::MutexLock lock(&mu);
      done_ring[static_cast<size_t>(batch % prefetch)] = std::move(result);
    }
    if (failed_batch) return;  // the consumer stops at this batch
  }
  for (auto& [event, bytes] : in_flight) event->synchronize();
}

GpuJpegLoader::GpuJpegLoader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<GpuJpegLoader>> GpuJpegLoader::Create(
    const ImageFolderDataset& dataset, GpuJpegDecoder& decoder, std::vector<int64_t> indices,
    GpuJpegLoaderOptions options) {
  if (options.batch_size < 1 || options.read_threads < 1 || options.prefetch < 1) {
    return absl::InvalidArgumentError(
        "GPU JPEG loader: batch size, read threads and prefetch must be >= 1");
  }
  auto impl = std::make_unique<Impl>(dataset, decoder, std::move(indices), options);
  {
    absl::MutexLock lock(&impl->mu);
    impl->read_ring.resize(static_cast<size_t>(impl->prefetch));
    impl->done_ring.resize(static_cast<size_t>(impl->prefetch));
  }
  Impl* raw = impl.get();
  raw->threads.emplace_back([raw] { raw->DecoderLoop(); });
  for (int i = 0; i < options.read_threads; ++i) {
    raw->threads.emplace_back([raw] { raw->ReaderLoop(); });
  }
  return std::unique_ptr<GpuJpegLoader>(new GpuJpegLoader(std::move(impl)));
}

GpuJpegLoader::~GpuJpegLoader() {
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->stop = true;
  }
  for (std::thread& t : impl_->threads) t.join();
}

absl::StatusOr<std::optional<Batch>> GpuJpegLoader::Next() {
  Impl& s = *impl_;
  if (s.failed.has_value()) return *s.failed;
  if (s.next >= s.num_batches) return std::optional<Batch>();
  const absl::Time start = absl::Now();
  absl::StatusOr<DecodedBatch> result;
  {
    absl::MutexLock lock(&s.mu);
    auto& slot = s.done_ring[static_cast<size_t>(s.next % s.prefetch)];
    s.mu.Await(absl::Condition(
        +[](std::optional<absl::StatusOr<DecodedBatch>>* p) { return p->has_value(); }, &slot));
    result = std::move(*slot);
    slot.reset();
    s.consumed = s.next + 1;
  }
  ++s.next;
  s.last_wait = absl::Now() - start;
  s.total_wait += s.last_wait;
  if (!result.ok()) {
    s.failed = result.status();
    return *s.failed;
  }
  try {
    // The training stream waits for the decode stream on the device, not on the host; the
    // caching allocator learns that the batch is used on the training stream.
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(s.device);
    result->ready->block(current);
    c10::cuda::CUDACachingAllocator::recordStream(result->batch.images.storage().data_ptr(),
                                                  current);
    c10::cuda::CUDACachingAllocator::recordStream(result->batch.labels.storage().data_ptr(),
                                                  current);
  } catch (const std::exception& e) {
    s.failed = absl::InternalError(absl::StrCat("GPU JPEG loader: ", FirstLine(e)));
    return *s.failed;
  }
  return std::optional<Batch>(std::move(result->batch));
}

int64_t GpuJpegLoader::num_batches() const { return impl_->num_batches; }
absl::Duration GpuJpegLoader::total_wait() const { return impl_->total_wait; }
absl::Duration GpuJpegLoader::last_wait() const { return impl_->last_wait; }

#endif  // DDP_WITH_CUDA

}  // namespace ddp::data
