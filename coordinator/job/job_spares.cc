// Job's spare nodes (proto/coordinator.proto, SPARES): spares standing by, and the lost nodes
// they take over. Same class and lock as job.cc.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/job/job.h"

namespace ddp {

absl::StatusOr<SpareDecision> Job::StandBy(const SpareReport& spare) {
  Completions out;
  absl::MutexLock lock(&mu_);
  if (!config_.nonce.empty() && !spare.nonce.empty() && spare.nonce != config_.nonce) {
    return absl::FailedPreconditionError(
        "nonce mismatch: the dist_file is stale (written by another coordinator start)");
  }
  if (membership_.SlotsOnNode(spare.node_rank) > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node ", spare.node_rank, " holds ranks of this job; a spare must be another node"));
  }
  if (FinishedLocked()) {
    return SpareDecision{SpareAction::kLeave, -1,
                         absl::StrCat("job ", JobStateName(lifecycle_.state()))};
  }
  const absl::Time now = clock_->Now();
  bool first = false;
  const Spares::Spare& me = spares_.Seen(spare, now, &first);
  if (first) {
    EventLocked(absl::StrCat("spare node ", spare.node_rank, " (host ", spare.host, ", pid ",
                             spare.pid, ") stands by with ", spare.local_world_size,
                             spare.local_world_size == 1 ? " worker" : " workers"),
                &out);
  }
  if (recovery_.in_progress()) TakeOverLostNodesLocked(now, &out);
  if (me.taking_over >= 0) {
    return SpareDecision{SpareAction::kTakeOver, me.taking_over,
                         membership_.DescribeNode(me.taking_over)};
  }
  return SpareDecision{SpareAction::kWait, -1, ""};
}

void Job::TakeOverLostNodesLocked(absl::Time now, Completions* out) {
  for (int node : membership_.VacantNodes()) {
    // A node whose task reported a lost worker, or still asks what to fence, is alive.
    if (recovery_.NodeAlive(node, now) || spares_.TakingOver(node)) {
      continue;
    }
    const std::string lost =
        absl::StrCat("lost ", membership_.DescribeNode(node), ": its task and workers went silent");
    const Spares::Spare* spare = spares_.Assign(node, membership_.SlotsOnNode(node), now);
    if (spare != nullptr) {
      EventLocked(
          absl::StrCat(lost, "; spare node ", spare->report.node_rank, " (host ",
                       spare->report.host, ", pid ", spare->report.pid, ") takes over its ranks"),
          out);
      continue;
    }
    const int nodes = membership_.NodesInSlots();
    const bool shrink = config_.min_nodes > 0 && nodes - 1 >= config_.min_nodes;
    // The node lost with the coordinator, no spare after kSpareWait, no shrinking allowed: the
    // survivors go on without it only to write the stop's checkpoint (exit 3, a requeue resumes
    // at full size), as a job whose coordinator is lost does.
    const bool stop = !shrink && node == coordinator_lost_node_ && nodes >= 2 &&
                      now - coordinator_lost_at_ >= kSpareWait;
    if (!shrink && !stop) continue;  // the deadline decides
    const int world = membership_.world_size();
    membership_.RemoveNode(node);
    if (stop) {
      EventLocked(
          absl::StrCat(lost, "; no spare standing by and no shrinking (--min-nodes): the ",
                       nodes - 1, " other node(s), world ", world, " -> ", membership_.world_size(),
                       ", write the stop's checkpoint and exit for a requeue"),
          out);
      RequestGracefulStopLocked(
          absl::StrCat(membership_.DescribeNode(node), " lost with the coordinator and no spare"),
          out);
      continue;
    }
    EventLocked(
        absl::StrCat(lost, "; no spare standing by: the job goes on without it on ", nodes - 1,
                     " node(s), world ", world, " -> ", membership_.world_size(), " (--min-nodes ",
                     config_.min_nodes, "); the rest of each epoch is split over the survivors"),
        out);
  }
  // A dropped node may have been all the next generation was waiting for.
  if (membership_.forming_next() && membership_.GenerationComplete()) CompleteRecoveryLocked(out);
}

}  // namespace ddp
