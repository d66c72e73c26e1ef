// In-job recovery bookkeeping (proto/coordinator.proto, RECOVERY): the job-wide restart budget
// (--max-restarts), the recovery in progress (when it began, why, its deadline), the duration of
// the last completed one, and every rank the job lost, in order, with its typed cause. It decides
// nothing about membership or states: Job asks it whether a restart is left and tells it what
// happened.
//
//   Recovery r(/*max_restarts=*/3, /*timeout=*/absl::Seconds(120));
//   if (r.CanRestart()) { r.Lose(cause, now); r.Begin(cause, now); }   // restarts() == 1
//   ... r.deadline() ...
//   r.End(now, /*replaced=*/{2});                                     // last_seconds()
//
// Thread safety: none; the owner (Job) calls it under its lock.
#ifndef SLURM_DDP_COORDINATOR_JOB_RECOVERY_H_
#define SLURM_DDP_COORDINATOR_JOB_RECOVERY_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/failure_cause.h"
#include "common/job_status.h"

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
  // A restarted coordinator: the restarts its journal says were used.
  void RestoreRestarts(int restarts) { restarts_ = restarts; }
  // A recovery begins (or, when one is in progress, its deadline moves to now + timeout: the
  // new loss gets the whole time too).
  void Begin(const FailureCause& cause, absl::Time now);
  // The new membership generation is complete: the recovery ends; `replaced` ranks have a
  // worker again (their lost entries read replaced).
  void End(absl::Time now, const std::vector<int>& replaced);
  // The job fails now: no recovery is in progress any more.
  void Abandon() { in_progress_ = false; }
  // Seconds since the recovery in progress began (0 when none).
  double Elapsed(absl::Time now) const;

  // The failure when no restart is left: `cause` itself when restarts are off (fail fast, as
  // without recovery); else `cause` with the text "<cause>; restarts exhausted (N of N used);
  // lost before: <every earlier lost rank and how>".
  FailureCause ExhaustedCause(const FailureCause& cause) const;

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
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_RECOVERY_H_
