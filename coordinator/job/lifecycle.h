// The job's state machine and its outcome: REGISTERING -> RUNNING (<-> RECOVERING) -> STOPPING
// -> STOPPED, or -> SUCCEEDED | FAILED, with the allowed moves in one table (Allowed). A
// recovery may also begin while STOPPING; a graceful stop asked during a recovery is kept, and
// the recovery then ends in STOPPING instead of RUNNING. It holds
// the typed failure cause (set once; only a root-cause report within a short window may revise
// it), the reason of a graceful stop (never mixed with the failure), the command every heartbeat
// reply carries, and the process exit code (common/exit_codes.h).
//
// Thread safety: none; the owner (Job) calls it under its lock.
#ifndef SLURM_DDP_COORDINATOR_JOB_LIFECYCLE_H_
#define SLURM_DDP_COORDINATOR_JOB_LIFECYCLE_H_

#include <string>

#include "absl/time/time.h"
#include "common/coordinator_api.h"
#include "common/failure_cause.h"
#include "common/job_status.h"

namespace ddp {

class Lifecycle {
 public:
  // Whether the state machine may move from `from` to `to` (a move to the same state is not one).
  static bool Allowed(JobState from, JobState to);

  JobState state() const { return state_; }
  bool finished() const { return IsTerminal(state_); }
  // What heartbeat replies carry: kAbort when FAILED, kCheckpointAndStop when STOPPING or
  // STOPPED (or RECOVERING after a stop was asked), kContinue otherwise.
  Command command() const;
  const FailureCause& failure() const { return failure_; }
  const std::string& stop_reason() const { return stop_reason_; }

  // Each returns true when the state changed (false: not allowed from the current state).
  bool Start();    // REGISTERING -> RUNNING
  bool Succeed();  // -> SUCCEEDED (every rank finished)
  // -> STOPPING, recording why. Also true when already STOPPING (the first reason stays), and
  // while RECOVERING, where the reason is kept and the state moves when the recovery ends.
  bool RequestStop(const std::string& reason);
  // RUNNING or STOPPING -> RECOVERING.
  bool BeginRecovery();
  // RECOVERING -> RUNNING, or STOPPING when a stop was asked.
  bool EndRecovery();
  bool stop_requested() const { return !stop_reason_.empty(); }
  bool FinishStop();  // STOPPING -> STOPPED (every rank checkpointed and stopped)
  // -> FAILED with `cause`, unless finished. A failure a rank reported itself may be revised
  // until `revisable_until` (Reattribute); pass absl::InfinitePast() for a final one.
  bool Fail(const FailureCause& cause, absl::Time revisable_until);
  // A death (`root`) reported at `now` while the failure is still revisable and names another
  // rank: the failure becomes RootCause(root, failure) and is final. Returns true when revised.
  bool Reattribute(const FailureCause& root, absl::Time now);

  // kExitOk when SUCCEEDED, kExitResumable when STOPPED, kExitFailed otherwise.
  int ExitCode() const;

 private:
  bool MoveTo(JobState next);

  JobState state_ = JobState::kRegistering;
  FailureCause failure_;
  std::string stop_reason_;
  absl::Time revisable_until_ = absl::InfinitePast();
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_LIFECYCLE_H_
