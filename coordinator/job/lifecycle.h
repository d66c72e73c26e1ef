// The job's state machine and its outcome: REGISTERING -> RUNNING (<-> RECOVERING) -> STOPPING
// -> STOPPED, or -> SUCCEEDED | FAILED, with the allowed moves in one table (Allowed). A
// recovery may also begin while STOPPING; a graceful stop asked during a recovery is kept, and
// the recovery then ends in STOPPING instead of RUNNING. It holds
// the typed failure cause (set once; only a root-cause report within a short window may revise
// it), the reason of a graceful stop (never mixed with the failure), the command every heartbeat
// reply carries, and the process exit code (common/exit_codes.h).
//
// It also keeps the job's clock-driven bookkeeping (times come from the owner's clock): how long
// the job has been registering (less the time the coordinator was suspended), since when it runs
// and since when its stop is under way, how many ranks finished, and how a stop that could not
// complete ended: every rank still running is told to exit (command kExit) with a reason.
//
//   Lifecycle l(start);
//   l.Start(); l.Stamp(now);                      // running_since() == now
//   l.RequestStop("preempted"); l.Stamp(later);   // StopOverdue(later + timeout + 1 s, timeout)
//   l.EndStopResumable("stop not completed; resumable from the checkpoint of step 40");
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
  // `start`: when the job began registering.
  explicit Lifecycle(absl::Time start = absl::UnixEpoch()) : start_(start) {}

  // Whether the state machine may move from `from` to `to` (a move to the same state is not one).
  static bool Allowed(JobState from, JobState to);

  JobState state() const { return state_; }
  bool finished() const { return IsTerminal(state_); }
  // What heartbeat replies carry: kExit once ranks were told to exit (OrderExit), else kAbort
  // when FAILED, kCheckpointAndStop when STOPPING or STOPPED (or RECOVERING after a stop was
  // asked), kContinue otherwise.
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

  // --- ranks finished --------------------------------------------------------------------------
  // A rank reported done or stopped. Once every one of `ranks` has: RUNNING -> SUCCEEDED, or
  // STOPPING -> STOPPED. True when the state changed.
  bool RankDone(int ranks);
  int ranks_done() const { return ranks_done_; }

  // --- times (the owner's clock) ---------------------------------------------------------------
  absl::Time start() const { return start_; }
  // The owner made a move at `now`: the first RUNNING and the first STOPPING are stamped.
  void Stamp(absl::Time now);
  // When the job first ran (InfiniteFuture before), and when its stop began (InfiniteFuture
  // while none is under way).
  absl::Time running_since() const { return running_since_; }
  absl::Time stopping_since() const { return stopping_since_; }
  // The coordinator was not running for `gap`: neither the registration's deadline nor the
  // stop's age counts it.
  void Suspended(absl::Duration gap);
  // How long the job has been registering at `now`, less the time the coordinator was suspended.
  absl::Duration RegistrationAge(absl::Time now) const {
    return now - start_ - registration_suspended_;
  }
  // STOPPING for longer than `timeout` at `now`.
  bool StopOverdue(absl::Time now, absl::Duration timeout) const {
    return state_ == JobState::kStopping && now - stopping_since_ > timeout;
  }

  // --- a graceful stop that cannot complete ----------------------------------------------------
  // Every rank still running is told to exit with `reason`: command() is kExit from now on, and
  // the replies carry exit_reason() and exit_code().
  void OrderExit(const std::string& reason) { exit_reason_ = reason; }
  // The stop ends resumable (a checkpoint was committed): STOPPED, `note` (why, and from which
  // checkpoint it resumes) kept beside the stop reason, and every running rank told to exit with
  // it. Returns whether the state changed.
  bool EndStopResumable(const std::string& note);
  const std::string& stop_note() const { return stop_note_; }
  bool exit_ordered() const { return !exit_reason_.empty(); }
  const std::string& exit_reason() const { return exit_reason_; }
  // The code ranks told to exit get: the job's exit code once that was ordered, else 0.
  int exit_code() const { return exit_ordered() ? ExitCode() : 0; }

 private:
  bool MoveTo(JobState next);

  JobState state_ = JobState::kRegistering;
  FailureCause failure_;
  std::string stop_reason_;
  absl::Time revisable_until_ = absl::InfinitePast();
  int ranks_done_ = 0;
  const absl::Time start_;
  absl::Duration registration_suspended_;
  absl::Time running_since_ = absl::InfiniteFuture();
  absl::Time stopping_since_ = absl::InfiniteFuture();
  std::string stop_note_;    // how a graceful stop that could not complete ended
  std::string exit_reason_;  // set when ranks are told to exit
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_LIFECYCLE_H_
