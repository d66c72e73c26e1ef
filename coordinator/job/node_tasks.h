// The job's node tasks as fencing sees them (proto/coordinator.proto, FENCING): when each node's
// task last asked which of its workers to kill, and which lost workers have been fenced
// already (so that each fence is logged once). A node whose task asked within `alive_within` is
// alive: its task can still fence and report its workers, so it is not a lost node. It decides
// nothing about ranks: Job tells it who asked and asks it what it saw.
//
//   NodeTasks t(/*alive_within=*/absl::Seconds(4));
//   t.Asked(/*node=*/1, now);                     // every Fences call
//   t.Alive(1, now);                              // true until 4 s after the last call
//   if (t.NoteFence(/*rank=*/3, /*pid=*/123)) ... // true the first time only
//
// Thread safety: none; the owner (Job) calls it under its lock.
#ifndef SLURM_DDP_COORDINATOR_JOB_NODE_TASKS_H_
#define SLURM_DDP_COORDINATOR_JOB_NODE_TASKS_H_

#include <map>
#include <set>
#include <utility>

#include "absl/time/time.h"

namespace ddp {

class NodeTasks {
 public:
  // How long after its last Fences call a node's task still counts as alive: a few of its
  // polling periods (about a second each), well under the heartbeat timeout, so that a node
  // that died with its task is found lost by the time its ranks are.
  static constexpr absl::Duration kAliveWithin = absl::Seconds(4);

  explicit NodeTasks(absl::Duration alive_within = kAliveWithin) : alive_within_(alive_within) {}

  void Asked(int node, absl::Time now) { last_asked_[node] = now; }
  bool Alive(int node, absl::Time now) const;
  // Records that worker `pid` of `rank` is being fenced; true the first time.
  bool NoteFence(int rank, int pid) { return fenced_.insert({rank, pid}).second; }
  // Whether worker `pid` of `rank` was fenced (NoteFence).
  bool WasFenced(int rank, int pid) const { return fenced_.count({rank, pid}) > 0; }
  int fenced() const { return static_cast<int>(fenced_.size()); }

 private:
  const absl::Duration alive_within_;
  std::map<int, absl::Time> last_asked_;
  std::set<std::pair<int, int>> fenced_;
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_NODE_TASKS_H_
