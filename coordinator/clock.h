// The coordinator's notion of time: a monotonic clock behind an interface so tests can inject a
// fake one (liveness and deadlines never use the wall clock).
//
// Thread safety: Now() may be called from any thread; implementations must be thread-safe.
#ifndef SLURM_DDP_COORDINATOR_CLOCK_H_
#define SLURM_DDP_COORDINATOR_CLOCK_H_

#include <chrono>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ddp {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

// std::chrono::steady_clock expressed as absl::Time (only differences are meaningful).
class MonotonicClock : public Clock {
 public:
  absl::Time Now() const override {
    return absl::FromUnixNanos(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
  }
  static MonotonicClock* Get() {
    static MonotonicClock clock;
    return &clock;
  }
};

// A clock that moves only when told (tests).
class FakeClock : public Clock {
 public:
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::FromUnixSeconds(1000000);
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_CLOCK_H_
