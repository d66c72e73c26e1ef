// Spare nodes standing by (ddp-trainer --spare-nodes; proto/coordinator.proto, SPARES): who
// stands by, when each was last heard from, and which lost node each one is taking over. It
// decides nothing about when a node is lost: Job asks it for a spare once one is.
//
//   Spares s(/*timeout=*/absl::Seconds(10));
//   s.Seen(report, now);                      // every StandBy call
//   if (const Spares::Spare* x = s.Assign(/*node=*/1, /*local_world_size=*/2, now)) ...
//   s.Settle();                               // the recovery completed: spares became nodes
//
// Thread safety: none; the owner (Job) calls it under its lock.
#ifndef SLURM_DDP_COORDINATOR_JOB_SPARES_H_
#define SLURM_DDP_COORDINATOR_JOB_SPARES_H_

#include <map>

#include "absl/time/time.h"
#include "common/coordinator_api.h"

namespace ddp {

class Spares {
 public:
  struct Spare {
    SpareReport report;
    absl::Time last_seen = absl::InfinitePast();
    int taking_over = -1;  // the lost node it was given, or -1
    bool settled = false;  // its takeover completed: it is one of the job's nodes now
  };

  // A spare not heard from for `timeout` is gone.
  explicit Spares(absl::Duration timeout) : timeout_(timeout) {}

  // A StandBy call from `report.node_rank`: records or refreshes that spare (`*first`: a process
  // not heard from before). The reference stays valid for the object's life.
  const Spare& Seen(const SpareReport& report, absl::Time now, bool* first = nullptr);
  // A spare heard from within the timeout, given no node yet, that starts `local_world_size`
  // workers (the one heard from last, then the lowest node id), now given `node`; nullptr
  // when there is none.
  const Spare* Assign(int node, int local_world_size, absl::Time now);
  // Whether Assign(any node, local_world_size, now) would find a spare.
  bool CanAssign(int local_world_size, absl::Time now) const;
  // Whether a takeover of `node` is under way (given, not settled).
  bool TakingOver(int node) const;
  // The recovery completed: every takeover under way is settled.
  void Settle();
  // Spares heard from within the timeout and given no node.
  int Standing(absl::Time now) const;

 private:
  bool Available(const Spare& s, absl::Time now) const {
    return s.taking_over < 0 && now - s.last_seen <= timeout_;
  }

  const absl::Duration timeout_;
  std::map<int, Spare> spares_;  // by the spare's own node id
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_SPARES_H_
