// Data-pipeline throughput on a JPEG image folder (ddp_make_jpegs output), in images/s, each
// measured over whole passes after a warm-up pass (files in the page cache):
//   gpu-pipeline     GpuJpegLoader: read + nvJPEG decode + RandomResizedCrop/flip/normalize on the
//                    GPU, batches delivered on the device (what ddp-trainer --data-pipeline gpu
//                    feeds the model);
//   gpu-decode       nvJPEG batched decode alone, bytes already in pinned memory (compares with
//                    torchvision.io.decode_jpeg(device="cuda") on a list, which also starts from
//                    bytes in memory);
//   cpu-pipeline     the CPU Loader with THREADS workers (libjpeg-turbo + the same transforms),
//                    batches copied to the GPU (--data-pipeline cpu);
//   compare          the GPU pipeline's batches against the CPU pipeline's for the first 512
//                    images: labels equal, pixels close (nvJPEG's IDCT and chroma upsampling are
//                    not libjpeg-turbo's, so a few grey levels apart, not bit-exact).
//   ddp_gpu_jpeg_bench FOLDER [BATCH=128] [THREADS=nproc] [PASSES=2] [PIPELINES=gpu,decode,cpu]
#include <c10/cuda/CUDAFunctions.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "trainer/data/gpu_jpeg_decoder.h"
#include "trainer/data/gpu_jpeg_loader.h"
#include "trainer/data/image_files.h"
#include "trainer/data/image_folder_dataset.h"
#include "trainer/data/jpeg_codec.h"
#include "trainer/data/loader.h"

namespace {

using Clock = std::chrono::steady_clock;
using ddp::data::BatchSource;
using ddp::data::EncodedJpeg;
using ddp::data::GpuJpegDecoder;
using ddp::data::GpuJpegDecoderStats;
using ddp::data::GpuJpegLoader;
using ddp::data::GpuJpegLoaderOptions;
using ddp::data::ImageFolderDataset;
using ddp::data::Loader;
using ddp::data::LoaderOptions;
using ddp::data::ReadFile;
using ddp::data::ReadJpegInfo;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Drains a batch source; returns images delivered.
int64_t Drain(BatchSource& source) {
  int64_t images = 0;
  for (;;) {
    auto batch = source.Next();
    if (!batch.ok()) {
      std::fprintf(stderr, "ddp_gpu_jpeg_bench: %s\n",
                   std::string(batch.status().message()).c_str());
      std::exit(1);
    }
    if (!*batch) return images;
    // Something the model would do with it: the batch must be ready on the device.
    images += (*batch)->images.size(0);
  }
}

void Report(const std::string& name, int64_t images, double seconds, const std::string& extra) {
  std::printf("RESULT pipeline=%s images_per_s=%.1f images=%ld seconds=%.2f%s\n", name.c_str(),
              images / seconds, static_cast<long>(images), seconds, extra.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: ddp_gpu_jpeg_bench FOLDER [BATCH] [THREADS] [PASSES] [PIPELINES]\n");
    return 2;
  }
  const std::string folder = argv[1];
  const int64_t batch = argc > 2 ? std::atoll(argv[2]) : 128;
  const int threads =
      argc > 3 ? std::atoi(argv[3]) : static_cast<int>(std::thread::hardware_concurrency());
  const int passes = argc > 4 ? std::atoi(argv[4]) : 2;
  const std::vector<std::string> pipelines =
      absl::StrSplit(argc > 5 ? argv[5] : "compare,gpu,decode,cpu", ',');
  if (!torch::cuda::is_available()) {
    std::fprintf(stderr, "ddp_gpu_jpeg_bench: no CUDA device visible\n");
    return 1;
  }
  ImageFolderDataset::Options options;
  options.transform = ImageFolderDataset::Transform::kTrain;
  options.normalization = {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
  auto dataset = ImageFolderDataset::Open(folder + "/train", options);
  if (!dataset.ok()) {
    std::fprintf(stderr, "ddp_gpu_jpeg_bench: %s\n",
                 std::string(dataset.status().message()).c_str());
    return 1;
  }
  std::vector<int64_t> order((*dataset)->size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 shuffle(0);
  std::shuffle(order.begin(), order.end(), shuffle);
  auto decoder = GpuJpegDecoder::Create(0);
  if (!decoder.ok()) {
    std::fprintf(stderr, "ddp_gpu_jpeg_bench: %s\n",
                 std::string(decoder.status().message()).c_str());
    return 1;
  }
  std::printf("images=%zu batch=%ld threads=%d decoder=%s\n", order.size(),
              static_cast<long>(batch), threads, (*decoder)->backend_name().c_str());

  for (const std::string& which : pipelines) {
    if (which == "gpu") {
      GpuJpegLoaderOptions go;
      go.batch_size = batch;
      go.read_threads = std::max(1, threads / 2);
      int64_t images = 0;
      double seconds = 0;
      for (int pass = 0; pass <= passes; ++pass) {  // pass 0 warms up
        go.epoch = pass;
        auto loader = GpuJpegLoader::Create(**dataset, **decoder, order, go);
        if (!loader.ok()) return 1;
        torch::cuda::synchronize();
        const auto start = Clock::now();
        const int64_t n = Drain(**loader);
        torch::cuda::synchronize();
        if (pass > 0) {
          images += n;
          seconds += Since(start);
        }
      }
      const GpuJpegDecoderStats stats = (*decoder)->stats();
      Report("gpu-pipeline", images, seconds,
             " nvjpeg_images=" + std::to_string(stats.gpu_images) +
                 " cpu_fallback_images=" + std::to_string(stats.cpu_images));
    } else if (which == "decode") {
      // All files in one pinned buffer, decoded batch by batch.
      std::vector<EncodedJpeg> all;
      std::vector<std::string> bytes;
      size_t total = 0;
      for (int64_t i : order) {
        auto b = ReadFile((*dataset)->samples()[static_cast<size_t>(i)].path);
        if (!b.ok()) return 1;
        total += b->size();
        bytes.push_back(*std::move(b));
      }
      at::Tensor pinned = at::empty({static_cast<int64_t>(total)},
                                    at::TensorOptions(at::kByte).pinned_memory(true));
      size_t offset = 0;
      for (size_t k = 0; k < bytes.size(); ++k) {
        uint8_t* dst = pinned.data_ptr<uint8_t>() + offset;
        std::memcpy(dst, bytes[k].data(), bytes[k].size());
        auto info = ReadJpegInfo(bytes[k], "image");
        if (!info.ok()) return 1;
        all.push_back({dst, bytes[k].size(), "image", info->width, info->height});
        offset += bytes[k].size();
      }
      int64_t images = 0;
      double seconds = 0;
      for (int pass = 0; pass <= passes; ++pass) {
        torch::cuda::synchronize();
        const auto start = Clock::now();
        for (size_t b = 0; b < all.size(); b += static_cast<size_t>(batch)) {
          std::vector<EncodedJpeg> chunk(
              all.begin() + static_cast<int64_t>(b),
              all.begin() +
                  static_cast<int64_t>(std::min(all.size(), b + static_cast<size_t>(batch))));
          auto decoded = (*decoder)->DecodeBatch(chunk);
          if (!decoded.ok()) {
            std::fprintf(stderr, "ddp_gpu_jpeg_bench: %s\n",
                         std::string(decoded.status().message()).c_str());
            return 1;
          }
        }
        torch::cuda::synchronize();
        if (pass > 0) {
          images += static_cast<int64_t>(all.size());
          seconds += Since(start);
        }
      }
      Report("gpu-decode", images, seconds, "");
    } else if (which == "cpu") {
      LoaderOptions lo;
      lo.batch_size = batch;
      lo.workers = threads;
      lo.pin_memory = true;
      int64_t images = 0;
      double seconds = 0;
      for (int pass = 0; pass <= std::min(passes, 1); ++pass) {
        lo.epoch = pass;
        auto loader = Loader::Create(**dataset, order, lo);
        if (!loader.ok()) return 1;
        const auto start = Clock::now();
        int64_t n = 0;
        for (;;) {
          auto b = (*loader)->Next();
          if (!b.ok()) return 1;
          if (!*b) break;
          at::Tensor on_gpu = (*b)->images.to(at::kCUDA, /*non_blocking=*/true);
          n += on_gpu.size(0);
        }
        torch::cuda::synchronize();
        if (pass > 0) {
          images += n;
          seconds += Since(start);
        }
      }
      Report("cpu-pipeline", images, seconds, " workers=" + std::to_string(threads));
    } else if (which == "compare") {
      const int64_t count = std::min<int64_t>(512, (*dataset)->size());
      std::vector<int64_t> first(static_cast<size_t>(count));
      std::iota(first.begin(), first.end(), 0);
      GpuJpegLoaderOptions go;
      go.batch_size = batch;
      go.read_threads = 2;
      auto loader = GpuJpegLoader::Create(**dataset, **decoder, first, go);
      if (!loader.ok()) return 1;
      double sum = 0;
      double worst = 0;
      int64_t values = 0;
      bool labels_equal = true;
      for (int64_t begin = 0; begin < count; begin += batch) {
        auto gpu = (*loader)->Next();
        const int64_t end = std::min(count, begin + batch);
        auto cpu =
            (*dataset)->GetBatch(absl::MakeConstSpan(first).subspan(
                                     static_cast<size_t>(begin), static_cast<size_t>(end - begin)),
                                 0);
        if (!gpu.ok() || !*gpu || !cpu.ok()) {
          std::fprintf(stderr, "ddp_gpu_jpeg_bench: compare: a pipeline failed\n");
          return 1;
        }
        labels_equal = labels_equal && at::equal((*gpu)->labels.cpu(), cpu->labels);
        // Normalized values back to grey levels (std of ImageNet's channels ~0.225).
        const at::Tensor grey = ((*gpu)->images.cpu() - cpu->images).abs() * (255.0 * 0.225);
        sum += grey.sum().item<double>();
        worst = std::max(worst, grey.max().item<double>());
        values += grey.numel();
      }
      std::printf(
          "RESULT pipeline=compare mean_grey=%.3f max_grey=%.1f labels_equal=%d images=%ld\n",
          sum / static_cast<double>(values), worst, labels_equal ? 1 : 0, static_cast<long>(count));
      std::fflush(stdout);
    } else {
      std::fprintf(stderr, "ddp_gpu_jpeg_bench: unknown pipeline %s\n", which.c_str());
      return 2;
    }
  }
  return 0;
}
