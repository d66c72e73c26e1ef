// In-job recovery bookkeeping (proto/coordinator.proto, RECOVERY): the job-wide restart budget
// (--max-restarts), the recovery in progress (when it began, why, its deadline), the duration of
// the last completed one, and every rank the job lost, in order, with its typed cause. It decides
// nothing about membership or states: Job asks it whether a restart is left and tells it what
// happened.
//
// It also keeps what a recovery needs to know along the way (docs/architecture.md, "In-job
// recovery" and "Spares and shrinking"): a survivor that rejoined while no loss was known (a
// collective failed first; the loss that explains it is awaited for a window), the restart such an
// unexplained failure took (the first loss found during its recovery takes it instead of another),
// the nodes whose launcher reported a lost worker during the recovery in progress, and the node
// tasks that ask what to fence (node_tasks.h): a node known alive either way is not a lost node.
//
//   Recovery r(/*max_restarts=*/3, /*timeout=*/absl::Seconds(120));
//   if (r.CanRestart()) { r.Lose(cause, now); r.Begin(cause, now); }   // restarts() == 1
//   ... r.deadline() ...
//   r.End(now, /*replaced=*/{2});                                     // last_seconds()
//   r.RejoinedEarly(now, "rank 1 (...)", "allreduce failed");        // no loss known yet
//   r.Unexplained(now + window, window);                              // the cause, once
//
// Thread safety: none; the owner (Job) calls it under its lock.
#ifndef SLURM_DDP_COORDINATOR_JOB_RECOVERY_H_
#define SLURM_DDP_COORDINATOR_JOB_RECOVERY_H_

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/failure_cause.h"
#include "common/job_status.h"
#include "coordinator/job/node_tasks.h"

namespace ddp {

class Recovery {
 public:
  // `start`: the job's start (lost ranks are stamped relative to it).
  Recovery(int max_restarts, absl::Duration timeout, absl::Time start);

  int max_restarts() const { return max_restarts_; }
  int restarts() const { return restarts_; }
  bool CanRestart() const { return restarts_ < max_restarts_; }
  bool in_progress() const { return in_progress_; }
  // Why the recovery in progress (or the last one) began.
  const FailureCause& cause() const { return cause_; }
  absl::Time deadline() const { return deadline_; }
  // Seconds from the loss to the completion of the last recovery; -1 before the first.
  double last_seconds() const { return last_seconds_; }
  const std::vector<LostRank>& lost() const { return lost_; }

  // Records a lost rank (whether or not it can be replaced).
  void Lose(const FailureCause& cause, absl::Time now);
  // Uses one restart (CanRestart() must be true).
  void UseRestart() { ++restarts_; }
  // A loss asks for a restart: the one an unexplained collective failure took (this loss
  // explains it; UseRestartForUnexplained), else a new one. False when none is left.
  bool TakeRestart();
  // A restarted coordinator: the restarts its journal says were used.
  void RestoreRestarts(int restarts) { restarts_ = restarts; }
  // A recovery begins (or, when one is in progress, its deadline moves to now + timeout: the
  // new loss gets the whole time too). An early rejoin is no longer awaited.
  void Begin(const FailureCause& cause, absl::Time now);
  // The new membership generation is complete: the recovery ends; `replaced` ranks have a
  // worker again (their lost entries read replaced). The early rejoin, the unexplained restart
  // and the reported nodes are forgotten.
  void End(absl::Time now, const std::vector<int>& replaced);
  // The job fails now: no recovery is in progress any more.
  void Abandon() { in_progress_ = false; }
  // Seconds since the recovery in progress began (0 when none).
  double Elapsed(absl::Time now) const;

  // The failure when no restart is left: `cause` itself when restarts are off (fail fast, as
  // without recovery); else `cause` with the text "<cause>; restarts exhausted (N of N used);
  // lost before: <every earlier lost rank and how>".
  FailureCause ExhaustedCause(const FailureCause& cause) const;
  // The text of `rank`'s latest loss, or "lost" when it has none.
  std::string LossOf(int rank) const;

  // --- a collective failure no loss explains yet -----------------------------------------------
  // A survivor (`who`, which saw `what`) rejoined while no loss was known: the first such rejoin
  // is kept until a recovery begins.
  void RejoinedEarly(absl::Time now, const std::string& who, const std::string& what);
  // Once the kept rejoin waited `window` (at `now`) for a loss in vain: the unexplained collective
  // failure (CauseOfUnexplainedCollectiveFailure), returned once.
  std::optional<FailureCause> Unexplained(absl::Time now, absl::Duration window);
  // Uses one restart (CanRestart() must be true) for an unexplained collective failure.
  void UseRestartForUnexplained();
  bool unexplained_restart() const { return unexplained_restart_; }

  // --- nodes -----------------------------------------------------------------------------------
  // `node`'s launcher reported a lost worker: its task lives (until the recovery ends).
  void NodeReported(int node) { reported_nodes_.insert(node); }
  // Whether `node`'s task is known alive at `now`: it reported a lost worker during the recovery
  // in progress, or it asks what to fence.
  bool NodeAlive(int node, absl::Time now) const;
  NodeTasks& node_tasks() { return node_tasks_; }
  const NodeTasks& node_tasks() const { return node_tasks_; }

 private:
  const int max_restarts_;
  const absl::Duration timeout_;
  const absl::Time start_;
  int restarts_ = 0;
  bool in_progress_ = false;
  FailureCause cause_;
  absl::Time began_ = absl::InfinitePast();
  absl::Time deadline_ = absl::InfiniteFuture();
  double last_seconds_ = -1.0;
  std::vector<LostRank> lost_;
  absl::Time early_rejoin_at_ = absl::InfiniteFuture();
  std::string early_rejoin_who_;
  std::string early_rejoin_what_;
  bool unexplained_restart_ = false;
  std::set<int> reported_nodes_;
  NodeTasks node_tasks_;
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_RECOVERY_H_
