#include "coordinator/epoch_lease.h"

#include <chrono>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ddp {
namespace {

int64_t SteadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

EpochLease::EpochLease(Options options)
    : options_(std::move(options)),
      serve_from_ns_(options_.wait_for_serve_from ? INT64_MAX : INT64_MIN) {
  {
    absl::MutexLock lock(&mu_);
    Refresh();
  }
  thread_ = std::thread([this] { Loop(); });
}

EpochLease::~EpochLease() {
  stop_.Notify();
  thread_.join();
}

bool EpochLease::Refresh() {
  const DistFileContents& me = options_.mine;
  absl::StatusOr<DistFileContents> now = ReadDistFile(options_.dist_file, {me.job_id, 0});
  if (now.ok() && now->job_id == me.job_id && now->generation == me.generation &&
      now->nonce == me.nonce && now->epoch > me.epoch) {
    if (!fenced_.exchange(true, std::memory_order_acq_rel) && options_.on_fenced) {
      options_.on_fenced(*now);
    }
    return false;
  }
  checked_ns_.store(SteadyNanos(), std::memory_order_release);
  return true;
}

absl::Status EpochLease::Current() {
  if (!fenced()) {
    const int64_t age = SteadyNanos() - checked_ns_.load(std::memory_order_acquire);
    bool current = age < absl::ToInt64Nanoseconds(options_.period);
    if (!current) {
      absl::MutexLock lock(&mu_);
      // Another caller may have read it meanwhile.
      current = SteadyNanos() - checked_ns_.load(std::memory_order_acquire) <
                    absl::ToInt64Nanoseconds(options_.period) ||
                Refresh();
    }
    if (current) {
      const int64_t now = absl::ToUnixNanos(absl::Now());
      if (now < serve_from_ns_.load(std::memory_order_acquire)) {
        return absl::UnavailableError(absl::StrCat("coordinator epoch ", options_.mine.epoch,
                                                   " does not serve yet (fencing wait)"));
      }
      last_accepted_ns_.store(now, std::memory_order_relaxed);
      return absl::OkStatus();
    }
  }
  return absl::UnavailableError(absl::StrCat("coordinator epoch ", options_.mine.epoch,
                                             " was superseded by a newer epoch (fenced)"));
}

absl::Time EpochLease::last_accepted() const {
  const int64_t ns = last_accepted_ns_.load(std::memory_order_relaxed);
  return ns == 0 ? absl::InfinitePast() : absl::FromUnixNanos(ns);
}

void EpochLease::Loop() {
  while (!stop_.WaitForNotificationWithTimeout(options_.period / 2)) {
    absl::MutexLock lock(&mu_);
    if (!Refresh()) return;
  }
}

}  // namespace ddp
