// Who is in the job: registration slots keyed by launch place (node_rank, local_rank), the
// barrier that answers every worker once the world is complete, the deterministic rank table
// (ordered by node, then local rank), the generation, and a description of who is missing.
//
// Thread safety: Join, FailWaiters and the registration views run under the owner's lock (Job).
// Once world_complete() has returned true (acquire), the rank table is immutable and who(),
// RankOf(), CheckWorker() and Describe() may be called from any thread without that lock.
#ifndef SLURM_DDP_COORDINATOR_JOB_MEMBERSHIP_H_
#define SLURM_DDP_COORDINATOR_JOB_MEMBERSHIP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/coordinator_api.h"
#include "coordinator/job/completions.h"

namespace ddp {

class Membership {
 public:
  using RegisterCallback = std::function<void(absl::StatusOr<RankAssignment>)>;

  // An empty `nonce` skips the staleness check.
  Membership(int world_size, std::string nonce, int64_t generation);
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  struct JoinResult {
    bool new_slot = false;    // `who` took a free slot (a registration event)
    bool world_full = false;  // ... and it was the last one: call Complete() next
  };
  // Joins `who` (already validated). `refusal`, when not OK, is the job's reason to refuse new
  // and repeated registrations (it failed). On success, `done` is queued until the world is
  // complete, or (a repeat from the same host and pid after completion) scheduled at once with
  // its assignment. On error `done` is untouched and the caller replies.
  absl::StatusOr<JoinResult> Join(const WorkerIdentity& who, RegisterCallback& done,
                                  const absl::Status& refusal, Completions* out);
  // After a join filled the world: builds the rank table, publishes it (world_complete() turns
  // true, release order: everything the owner wrote before is visible to lock-free readers) and
  // schedules every queued callback with its assignment.
  void Complete(Completions* out);
  // Answers every queued registration with `error` (the job failed before the world completed).
  void FailWaiters(const absl::Status& error, Completions* out);

  int world_size() const { return world_size_; }
  int registered() const { return static_cast<int>(slots_.size()); }
  int num_nodes() const { return num_nodes_; }
  // The registered workers in (node_rank, local_rank) order.
  std::vector<WorkerIdentity> Registered() const;
  // The worker registered at (node_rank, local_rank), or nullptr.
  const WorkerIdentity* Find(int node_rank, int local_rank) const;
  // "2 of 4 workers registered; missing node 1 (h1) local ranks 0,1" (or a coarser form when
  // the layout cannot be inferred).
  std::string MissingWorkers() const;
  // "worker (host h, node 1, local rank 0, pid 7)": a worker without a rank yet.
  static std::string DescribeWorker(const WorkerIdentity& who);

  // --- once the world is complete -------------------------------------------------------------
  bool world_complete() const { return complete_.load(std::memory_order_acquire); }
  int num_ranks() const;  // 0 until complete
  const WorkerIdentity& who(int rank) const { return ranks_[static_cast<size_t>(rank)]; }
  // The rank at (node_rank, local_rank), or -1.
  int RankOf(int node_rank, int local_rank) const;
  // OK when the world is complete, `rank` is in range and registered to `pid`.
  absl::Status CheckWorker(int rank, int pid) const;
  RankAssignment Assignment(int rank) const;
  // "rank 3 (host h, node 1, local rank 1, pid 13)"
  std::string Describe(int rank) const;
  // One line per rank, "rank 0 = node 0 local 0 (host h, pid 7)", for the log.
  std::vector<std::string> RankTable() const;

 private:
  struct Slot {
    WorkerIdentity who;
    std::vector<RegisterCallback> waiting;
  };

  const int world_size_;
  const std::string nonce_;
  const int64_t generation_;
  std::map<std::pair<int, int>, Slot> slots_;  // ordered: ranks follow map order
  int num_nodes_ = 0;
  // Written once in Complete() before complete_ is set (release); read-only afterwards.
  // num_nodes_ too.
  std::vector<WorkerIdentity> ranks_;
  std::atomic<bool> complete_{false};
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_MEMBERSHIP_H_
