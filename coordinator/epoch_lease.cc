#include "coordinator/epoch_lease.h"

#include <time.h>

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/job_result.h"
#include "common/signal_free_thread.h"

namespace ddp {
namespace {

// CLOCK_BOOTTIME: unlike the steady clock it counts a suspended machine's sleep, so a node that
// wakes up finds its last read old and reads the file again before it answers.
int64_t SteadyNanos() {
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

EpochLease::EpochLease(Options options)
    : options_(std::move(options)),
      serve_from_ns_(options_.wait_for_serve_from ? INT64_MAX : INT64_MIN) {
  {
    absl::MutexLock lock(&mu_);
    Refresh();
  }
  // The thread takes no process signal (a job step's SIGUSR1 is the signal watcher's).
  thread_ = SignalFreeThread([this] { Loop(); });
}

EpochLease::~EpochLease() {
  stop_.Notify();
  thread_.join();
}

std::optional<Supersession> EpochLease::Superseded() const {
  const DistFileContents& me = options_.mine;
  absl::StatusOr<DistFileContents> now = ReadDistFile(options_.dist_file, {me.job_id, 0});
  const bool same_job = now.ok() && now->job_id == me.job_id && now->generation == me.generation &&
                        now->nonce == me.nonce;
  if (same_job) {
    if (now->epoch <= me.epoch) return std::nullopt;
    return Supersession{
        now->epoch, absl::StrCat("the dist_file names coordinator epoch ", now->epoch, " (node ",
                                 now->coordinator_node, ", ", now->grpc_address, ")")};
  }
  // Gone (or another job's now): the job may have ended under a newer epoch meanwhile.
  const std::optional<JobResult> result =
      ReadJobResultOf(options_.dist_file, me.job_id, me.generation);
  if (!result || result->epoch <= me.epoch) return std::nullopt;
  return Supersession{result->epoch,
                      absl::StrCat("the job ended under coordinator epoch ", result->epoch, " (",
                                   result->state, ", ", JobResultPath(options_.dist_file), ")")};
}

bool EpochLease::Refresh() {
  // Taken before the read: a process stopped between the read and this moment must not come
  // back with a lease that looks fresher than what it read.
  const int64_t read_at = SteadyNanos();
  if (const std::optional<Supersession> by = Superseded(); by) {
    if (!fenced_.exchange(true, std::memory_order_acq_rel) && options_.on_fenced) {
      options_.on_fenced(*by);
    }
    return false;
  }
  checked_ns_.store(read_at, std::memory_order_release);
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
