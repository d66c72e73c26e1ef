// Writes an ImageNet-like image folder of generated JPEGs for the data-pipeline benchmarks:
// ROOT/{train,val}/classNN/imgNNNNN.jpg, N train images (and N/10 val) of about WIDTHxHEIGHT
// (+-15%), smooth random content with mild noise (so sizes and entropy are photo-like, not
// noise-like), baseline JPEG, 4:2:0, quality Q. Deterministic for a given seed; multi-threaded.
//   ddp_make_jpegs ROOT N [CLASSES=100] [WIDTH=500] [HEIGHT=375] [QUALITY=90] [THREADS=nproc]
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "trainer/data/jpeg_codec.h"
#include "trainer/data/sample_rng.h"

namespace {

using ddp::data::RgbImage;
using ddp::data::SampleRng;

RgbImage Generate(int64_t index, int width, int height) {
  SampleRng rng(12345, 0, index);
  RgbImage image;
  image.width = static_cast<int>(width * rng.Uniform(0.85, 1.15));
  image.height = static_cast<int>(height * rng.Uniform(0.85, 1.15));
  const int gw = image.width / 16 + 2;
  const int gh = image.height / 16 + 2;
  std::vector<float> grid(static_cast<size_t>(gw) * gh * 3);
  for (float& v : grid) v = static_cast<float>(rng.Uniform(0, 255));
  image.pixels.resize(static_cast<size_t>(image.width) * image.height * 3);
  for (int y = 0; y < image.height; ++y) {
    const float fy = y / 16.0f;
    const int y0 = static_cast<int>(fy);
    const float ty = fy - y0;
    for (int x = 0; x < image.width; ++x) {
      const float fx = x / 16.0f;
      const int x0 = static_cast<int>(fx);
      const float tx = fx - x0;
      for (int c = 0; c < 3; ++c) {
        auto g = [&](int gx, int gy) { return grid[(static_cast<size_t>(gy) * gw + gx) * 3 + c]; };
        const float v = (1 - ty) * ((1 - tx) * g(x0, y0) + tx * g(x0 + 1, y0)) +
                        ty * ((1 - tx) * g(x0, y0 + 1) + tx * g(x0 + 1, y0 + 1));
        const float noisy = v + static_cast<float>(rng.Uniform(-20, 20));
        image.pixels[(static_cast<size_t>(y) * image.width + x) * 3 + c] =
            static_cast<uint8_t>(std::clamp(noisy, 0.0f, 255.0f));
      }
    }
  }
  return image;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: ddp_make_jpegs ROOT N [CLASSES=100] [WIDTH=500] [HEIGHT=375] "
                 "[QUALITY=90] [THREADS]\n");
    return 2;
  }
  const std::string root = argv[1];
  const int64_t n = std::atoll(argv[2]);
  const int classes = argc > 3 ? std::atoi(argv[3]) : 100;
  const int width = argc > 4 ? std::atoi(argv[4]) : 500;
  const int height = argc > 5 ? std::atoi(argv[5]) : 375;
  const int quality = argc > 6 ? std::atoi(argv[6]) : 90;
  const int threads =
      argc > 7 ? std::atoi(argv[7]) : std::max(1u, std::thread::hardware_concurrency());
  if (n < 1 || classes < 1 || width < 16 || height < 16 || quality < 1 || quality > 100) {
    std::fprintf(stderr, "ddp_make_jpegs: bad arguments\n");
    return 2;
  }
  struct Job {
    std::string path;
    int64_t index;
  };
  std::vector<Job> jobs;
  for (const auto& [split, count] :
       {std::pair<std::string, int64_t>{"train", n}, {"val", std::max<int64_t>(1, n / 10)}}) {
    ::mkdir((root).c_str(), 0755);
    ::mkdir((root + "/" + split).c_str(), 0755);
    for (int64_t i = 0; i < count; ++i) {
      char name[64];
      std::snprintf(name, sizeof(name), "/class%03d", static_cast<int>(i % classes));
      const std::string folder = root + "/" + split + name;
      ::mkdir(folder.c_str(), 0755);
      std::snprintf(name, sizeof(name), "/img%06ld.jpg", static_cast<long>(i));
      jobs.push_back({folder + name, (split == "train" ? 0 : n) + i});
    }
  }
  std::atomic<size_t> next{0};
  std::atomic<int64_t> bytes{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (size_t k = next++; k < jobs.size(); k = next++) {
        auto jpeg = ddp::data::EncodeJpeg(Generate(jobs[k].index, width, height), quality);
        FILE* f = jpeg.ok() ? std::fopen(jobs[k].path.c_str(), "wb") : nullptr;
        if (f == nullptr || std::fwrite(jpeg->data(), 1, jpeg->size(), f) != jpeg->size()) {
          std::fprintf(stderr, "ddp_make_jpegs: cannot write %s\n", jobs[k].path.c_str());
          failed = true;
        }
        if (f != nullptr) std::fclose(f);
        bytes += jpeg.ok() ? static_cast<int64_t>(jpeg->size()) : 0;
      }
    });
  }
  for (auto& t : pool) t.join();
  if (failed) return 1;
  std::printf("wrote %zu JPEGs under %s, %.1f KB on average\n", jobs.size(), root.c_str(),
              static_cast<double>(bytes) / 1024.0 / static_cast<double>(jobs.size()));
  return 0;
}
