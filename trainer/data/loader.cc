#include "trainer/data/loader.h"

#include <c10/util/ParallelGuard.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ddp::data {

absl::StatusOr<std::unique_ptr<Loader>> Loader::Create(const Dataset& dataset,
                                                       std::vector<int64_t> indices,
                                                       LoaderOptions options) {
  if (options.batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("loader: batch size must be >= 1, got ", options.batch_size));
  }
  if (options.workers < 0 || options.prefetch < 0) {
    return absl::InvalidArgumentError("loader: workers and prefetch must be >= 0");
  }
  if (options.pin_memory && !at::hasCUDA()) {
    return absl::FailedPreconditionError("loader: pin_memory needs a CUDA device");
  }
  return std::unique_ptr<Loader>(new Loader(dataset, std::move(indices), options));
}

Loader::Loader(const Dataset& dataset, std::vector<int64_t> indices, LoaderOptions options)
    : dataset_(dataset),
      indices_(std::move(indices)),
      options_(options),
      num_batches_(options.drop_last
                       ? static_cast<int64_t>(indices_.size()) / options.batch_size
                       : (static_cast<int64_t>(indices_.size()) + options.batch_size - 1) /
                             options.batch_size),
      prefetch_(options.prefetch > 0 ? options.prefetch : std::max(1, 2 * options.workers)) {
  if (options_.workers > 0) {
    {
      absl::MutexLock lock(&mu_);
      slots_.resize(static_cast<size_t>(prefetch_));
    }
    workers_.reserve(static_cast<size_t>(options_.workers));
    for (int i = 0; i < options_.workers; ++i) workers_.emplace_back([this] { WorkerLoop(); });
  }
}

Loader::~Loader() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& worker : workers_) worker.join();
}

absl::StatusOr<Batch> Loader::Load(int64_t batch) const {
  const int64_t begin = batch * options_.batch_size;
  const int64_t end = std::min(begin + options_.batch_size, static_cast<int64_t>(indices_.size()));
  try {
    absl::StatusOr<Batch> result =
        dataset_.GetBatch(absl::MakeConstSpan(indices_).subspan(static_cast<size_t>(begin),
                                                                static_cast<size_t>(end - begin)),
                          options_.epoch);
    if (result.ok() && options_.pin_memory) {
      result->images = result->images.pin_memory();
      result->labels = result->labels.pin_memory();
    }
    return result;
  } catch (const std::exception& e) {
    // c10::Error and friends from torch ops: one line, the first of torch's message.
    std::string what = e.what();
    return absl::InternalError(
        absl::StrCat("loading batch ", batch, ": ", what.substr(0, what.find('\n'))));
  }
}

void Loader::WorkerLoop() {
  // No intra-op parallelism inside loader threads (see the header).
  c10::ParallelGuard no_intra_op(true);
  while (true) {
    int64_t batch = 0;
    {
      absl::MutexLock lock(&mu_);
      auto can_claim = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || claimed_ >= num_batches_ || claimed_ < consumed_ + prefetch_;
      };
      mu_.Await(absl::Condition(&can_claim));
      if (stop_ || claimed_ >= num_batches_) return;
      batch = claimed_++;
    }
    absl::StatusOr<Batch> result = Load(batch);
    absl::MutexLock lock(&mu_);
    Slot& slot = slots_[static_cast<size_t>(batch % prefetch_)];
    slot.batch = std::move(result);
    slot.ready = true;
  }
}

absl::StatusOr<std::optional<Batch>> Loader::Next() {
  if (failed_.has_value()) return *failed_;
  if (next_ >= num_batches_) return std::optional<Batch>();
  const absl::Time start = absl::Now();
  absl::StatusOr<Batch> result;
  if (workers_.empty()) {
    result = Load(next_);
  } else {
    absl::MutexLock lock(&mu_);
    Slot& slot = slots_[static_cast<size_t>(next_ % prefetch_)];
    mu_.Await(absl::Condition(&slot.ready));
    result = std::move(slot.batch);
    slot.ready = false;
    slot.batch = absl::UnknownError("empty loader slot");
    consumed_ = next_ + 1;
  }
  ++next_;
  last_wait_ = absl::Now() - start;
  total_wait_ += last_wait_;
  if (!result.ok()) {
    failed_ = result.status();
    return *failed_;
  }
  return std::optional<Batch>(*std::move(result));
}

}  // namespace ddp::data
