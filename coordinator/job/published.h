// What the job publishes for threads that do not take its lock (docs/architecture.md,
// "Concurrency"): the command every heartbeat reply carries (it mirrors Lifecycle::command()),
// the membership generation heartbeats announce (the one being formed, else the current one), the
// stalled ranks told to exit (exit_orders.h), and the version counters status readers poll. The
// job writes them under its lock; any thread reads them without it.
//
// Thread safety: thread-safe (atomics, and ExitOrders' own lock).
#ifndef SLURM_DDP_COORDINATOR_JOB_PUBLISHED_H_
#define SLURM_DDP_COORDINATOR_JOB_PUBLISHED_H_

#include <atomic>
#include <cstdint>

#include "common/coordinator_api.h"
#include "coordinator/job/exit_orders.h"

namespace ddp {

class Published {
 public:
  Command command() const { return command_.load(std::memory_order_acquire); }
  void set_command(Command command) { command_.store(command, std::memory_order_release); }
  int64_t generation() const { return generation_.load(std::memory_order_acquire); }
  void Announce(int64_t generation) { generation_.store(generation, std::memory_order_release); }

  ExitOrders& exit_orders() { return exit_orders_; }
  const ExitOrders& exit_orders() const { return exit_orders_; }

  // Bumped by every change, heartbeats included.
  uint64_t version() const { return version_.load(std::memory_order_acquire); }
  // Bumped only by structural changes (registrations, state changes, events, checkpoints, ranks
  // done): what a status reader must never miss.
  uint64_t major_version() const { return major_version_.load(std::memory_order_acquire); }
  // A change only the version counts (a heartbeat, a shard).
  void Touched() { version_.fetch_add(1, std::memory_order_acq_rel); }
  // A structural change: both versions move.
  void Changed() {
    version_.fetch_add(1, std::memory_order_acq_rel);
    major_version_.fetch_add(1, std::memory_order_acq_rel);
  }

 private:
  std::atomic<Command> command_{Command::kContinue};
  std::atomic<int64_t> generation_{0};
  ExitOrders exit_orders_;
  std::atomic<uint64_t> version_{0};
  std::atomic<uint64_t> major_version_{0};
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_PUBLISHED_H_
