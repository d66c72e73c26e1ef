// Throughput of ddp_data's JPEG ImageFolder loading: the train split of --data imagefolder:ROOT
// (RandomResizedCrop(224) + flip + normalize), read through the Loader with --workers threads,
// one epoch in index order. Prints one line: "ours: N images in S s = R images/s".
// Run by bench/data.sh, which also runs torchvision's DataLoader for comparison.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>

#include "trainer/data/data_spec.h"
#include "trainer/data/loader.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s ROOT WORKERS BATCH_SIZE\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  const int workers = std::atoi(argv[2]);
  const int batch_size = std::atoi(argv[3]);
  absl::StatusOr<ddp::data::DataSpec> spec = ddp::data::ParseDataSpec("imagefolder:" + root);
  if (!spec.ok()) {
    std::fprintf(stderr, "%s\n", std::string(spec.status().message()).c_str());
    return 1;
  }
  absl::StatusOr<ddp::data::DatasetPair> data = ddp::data::OpenDatasets(*spec, {});
  if (!data.ok()) {
    std::fprintf(stderr, "%s\n", std::string(data.status().message()).c_str());
    return 1;
  }
  std::vector<int64_t> order(static_cast<size_t>(data->train->size()));
  std::iota(order.begin(), order.end(), 0);
  ddp::data::LoaderOptions options;
  options.batch_size = batch_size;
  options.workers = workers;
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<ddp::data::Loader>> loader =
      ddp::data::Loader::Create(*data->train, order, options);
  if (!loader.ok()) {
    std::fprintf(stderr, "%s\n", std::string(loader.status().message()).c_str());
    return 1;
  }
  int64_t images = 0;
  while (true) {
    absl::StatusOr<std::optional<ddp::data::Batch>> batch = (*loader)->Next();
    if (!batch.ok()) {
      std::fprintf(stderr, "%s\n", std::string(batch.status().message()).c_str());
      return 1;
    }
    if (!batch->has_value()) break;
    images += (*batch)->images.size(0);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("ours: %lld images in %.2f s = %.1f images/s\n", static_cast<long long>(images),
              seconds, static_cast<double>(images) / seconds);
  return 0;
}
