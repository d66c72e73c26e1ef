#include "trainer/data/loader.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "trainer/data/sample_rng.h"

namespace ddp::data {
namespace {

// Image i is a [1,2,2] tensor filled with i; label i % 10. Optionally fails at one index and
// sleeps a pseudo-random time per sample so workers finish out of order.
class FakeDataset : public Dataset {
 public:
  explicit FakeDataset(int64_t size, int64_t fail_at = -1, int max_sleep_us = 0)
      : size_(size), fail_at_(fail_at), max_sleep_us_(max_sleep_us) {}
  int64_t size() const override { return size_; }
  std::vector<int64_t> sample_shape() const override { return {1, 2, 2}; }
  int64_t num_classes() const override { return 10; }
  std::string description() const override { return "fake"; }
  absl::StatusOr<Example> Get(int64_t index, int64_t epoch) const override {
    gets_.fetch_add(1);
    if (max_sleep_us_ > 0) {
      SampleRng rng(1, epoch, index);
      std::this_thread::sleep_for(std::chrono::microseconds(rng.UniformInt(0, max_sleep_us_)));
    }
    if (index == fail_at_) return absl::DataLossError(absl::StrCat("sample ", index, " is bad"));
    return Example{at::full({1, 2, 2}, static_cast<float>(index)), index % 10};
  }
  int64_t gets() const { return gets_.load(); }

 private:
  int64_t size_;
  int64_t fail_at_;
  int max_sleep_us_;
  mutable std::atomic<int64_t> gets_{0};
};

std::vector<int64_t> Shuffled(int64_t n) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = (i * 37 + 11) % n;
  return order;
}

// Drains a loader; returns the sample indices seen (decoded from the images) and batch sizes.
void Drain(Loader& loader, std::vector<int64_t>* seen, std::vector<int64_t>* sizes) {
  while (true) {
    absl::StatusOr<std::optional<Batch>> batch = loader.Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    if (!batch->has_value()) return;
    const Batch& b = **batch;
    ASSERT_EQ(b.images.dim(), 4);
    ASSERT_EQ(b.images.size(0), b.labels.size(0));
    sizes->push_back(b.images.size(0));
    for (int64_t i = 0; i < b.images.size(0); ++i) {
      const auto index = static_cast<int64_t>(b.images[i][0][0][0].item<float>());
      EXPECT_EQ(b.labels[i].item<int64_t>(), index % 10);
      seen->push_back(index);
    }
  }
}

TEST(LoaderTest, DeliversBatchesInIndexOrderForAnyWorkerCount) {
  FakeDataset dataset(103, -1, 300);
  const std::vector<int64_t> order = Shuffled(103);
  for (int workers : {0, 1, 4}) {
    for (bool drop_last : {false, true}) {
      SCOPED_TRACE(absl::StrCat("workers=", workers, " drop_last=", drop_last));
      LoaderOptions options;
      options.batch_size = 10;
      options.drop_last = drop_last;
      options.workers = workers;
      auto loader = Loader::Create(dataset, order, options);
      ASSERT_TRUE(loader.ok()) << loader.status();
      EXPECT_EQ((*loader)->num_batches(), drop_last ? 10 : 11);
      std::vector<int64_t> seen, sizes;
      Drain(**loader, &seen, &sizes);
      const size_t expected = drop_last ? 100 : 103;
      ASSERT_EQ(seen.size(), expected);
      EXPECT_TRUE(std::equal(seen.begin(), seen.end(), order.begin()));
      EXPECT_EQ(sizes.back(), drop_last ? 10 : 3);
      EXPECT_EQ((*loader)->batches_returned(), (*loader)->num_batches());
      // Past the end stays at the end.
      auto after = (*loader)->Next();
      ASSERT_TRUE(after.ok());
      EXPECT_FALSE(after->has_value());
    }
  }
}

TEST(LoaderTest, EmptyIndexListGivesNoBatches) {
  FakeDataset dataset(10);
  auto loader = Loader::Create(dataset, {}, LoaderOptions{});
  ASSERT_TRUE(loader.ok());
  auto batch = (*loader)->Next();
  ASSERT_TRUE(batch.ok());
  EXPECT_FALSE(batch->has_value());
}

TEST(LoaderTest, PrefetchIsBounded) {
  FakeDataset dataset(1000);
  LoaderOptions options;
  options.batch_size = 5;
  options.workers = 3;
  options.prefetch = 2;
  auto loader = Loader::Create(dataset, Shuffled(1000), options);
  ASSERT_TRUE(loader.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(dataset.gets(), 2 * 5);  // two batches ahead, then the workers wait
  ASSERT_TRUE((*loader)->Next().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(dataset.gets(), 3 * 5);
}

TEST(LoaderTest, DestroyingMidEpochJoinsWorkersPromptly) {
  FakeDataset dataset(100000, -1, 2000);
  LoaderOptions options;
  options.batch_size = 8;
  options.workers = 4;
  auto loader = Loader::Create(dataset, Shuffled(100000), options);
  ASSERT_TRUE(loader.ok());
  ASSERT_TRUE((*loader)->Next().ok());
  const auto start = std::chrono::steady_clock::now();
  loader->reset();
  // A worker finishes at most its current batch (8 samples x <= 2 ms).
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  const int64_t gets = dataset.gets();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(dataset.gets(), gets);  // nothing runs after the destructor
}

TEST(LoaderTest, WorkerErrorSurfacesFromNextAtThatBatch) {
  for (int workers : {0, 2}) {
    SCOPED_TRACE(absl::StrCat("workers=", workers));
    FakeDataset dataset(50, /*fail_at=*/23);
    std::vector<int64_t> order(50);
    for (int64_t i = 0; i < 50; ++i) order[static_cast<size_t>(i)] = i;
    LoaderOptions options;
    options.batch_size = 10;
    options.workers = workers;
    auto loader = Loader::Create(dataset, order, options);
    ASSERT_TRUE(loader.ok());
    EXPECT_TRUE((*loader)->Next().ok());
    EXPECT_TRUE((*loader)->Next().ok());
    auto bad = (*loader)->Next();
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status(), absl::DataLossError("sample 23 is bad"));
    EXPECT_EQ((*loader)->Next().status(), bad.status());  // sticky
  }
}

TEST(LoaderTest, ReportsWaitTime) {
  FakeDataset dataset(40, -1, 1000);
  LoaderOptions options;
  options.batch_size = 20;
  options.workers = 1;
  auto loader = Loader::Create(dataset, Shuffled(40), options);
  ASSERT_TRUE(loader.ok());
  ASSERT_TRUE((*loader)->Next().ok());
  EXPECT_GT((*loader)->last_wait(), absl::ZeroDuration());
  EXPECT_GE((*loader)->total_wait(), (*loader)->last_wait());
}

TEST(LoaderTest, RejectsBadOptions) {
  FakeDataset dataset(10);
  LoaderOptions options;
  options.batch_size = 0;
  EXPECT_EQ(Loader::Create(dataset, {1, 2}, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.batch_size = 1;
  options.workers = -1;
  EXPECT_EQ(Loader::Create(dataset, {1, 2}, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  if (!at::hasCUDA()) {
    options.workers = 1;
    options.pin_memory = true;
    EXPECT_EQ(Loader::Create(dataset, {1, 2}, options).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
}

}  // namespace
}  // namespace ddp::data
