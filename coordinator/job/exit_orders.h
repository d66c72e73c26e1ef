// Stalled ranks told to exit so that their launchers replace them (docs/architecture.md, "Stall":
// with a restart left, only the stalled worker is told EXIT): by rank, the worker's pid (a
// replacement in the same rank is not told) and why. A new membership generation clears them.
//
//   ExitOrders o;
//   o.Order(/*rank=*/3, /*pid=*/123, "rank 3 stalled in data");  // true; again: false
//   o.For(3, 123);   // the reason; For(3, 456) (its replacement): nullopt
//   o.Clear();       // the new generation is complete
//
// Thread safety: thread-safe. For() takes no lock while no order is pending (every heartbeat asks
// it). The job calls Order and Clear under its own lock: that lock before this one.
#ifndef SLURM_DDP_COORDINATOR_JOB_EXIT_ORDERS_H_
#define SLURM_DDP_COORDINATOR_JOB_EXIT_ORDERS_H_

#include <atomic>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace ddp {

class ExitOrders {
 public:
  ExitOrders() = default;
  ExitOrders(const ExitOrders&) = delete;
  ExitOrders& operator=(const ExitOrders&) = delete;

  // `rank`'s worker `pid` is told to exit with `reason`. False when that worker was told already
  // (the first reason stays).
  bool Order(int rank, int pid, const std::string& reason) ABSL_LOCKS_EXCLUDED(mu_);
  // Why `rank`'s worker `pid` was told to exit; nullopt when it was not.
  std::optional<std::string> For(int rank, int pid) const ABSL_LOCKS_EXCLUDED(mu_);
  void Clear() ABSL_LOCKS_EXCLUDED(mu_);
  int pending() const { return pending_.load(std::memory_order_acquire); }

 private:
  struct Entry {
    int pid = 0;
    std::string reason;
  };

  mutable absl::Mutex mu_;
  absl::flat_hash_map<int, Entry> orders_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> pending_{0};  // orders_.size(), read without mu_
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_EXIT_ORDERS_H_
