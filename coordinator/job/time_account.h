// Where the job's wall time goes (docs/operations.md, "Where the time goes"): the coordinator
// says, every few hundred milliseconds, what the job is doing (Job classifies it from the
// lifecycle and the ranks' phases), and the time since the previous call is charged to what it
// was doing then. ETTR is the share of training (steps that count) in the wall time since the
// job's start. Recoveries in place lose no committed step (the state comes from the most
// advanced peer), so training time is time on steps that count; a step cut short by a failure
// (at most one per recovery) counts as training.
//
// Thread safety: none; the owner (Job) calls it under its lock.
#ifndef SLURM_DDP_COORDINATOR_JOB_TIME_ACCOUNT_H_
#define SLURM_DDP_COORDINATOR_JOB_TIME_ACCOUNT_H_

#include "absl/time/time.h"
#include "common/job_status.h"

namespace ddp {

enum class TimeUseKind { kStartup, kTraining, kRecovery, kStall, kCheckpoint, kEvaluation, kOther };

class TimeAccount {
 public:
  // The job starts at `start`, in start-up.
  explicit TimeAccount(absl::Time start) : last_(start) {}

  // The job does `use` from `now` on; the time since the previous call goes to the use then.
  void Charge(absl::Time now, TimeUseKind use);
  // The job ended at `now`: later calls charge nothing.
  void Stop(absl::Time now);
  // The account at `now` (the time since the last call charged to the current use).
  TimeUse Read(absl::Time now) const;

 private:
  static void Add(TimeUse* t, TimeUseKind use, double seconds);

  TimeUse used_;
  TimeUseKind use_ = TimeUseKind::kStartup;
  absl::Time last_;
  bool stopped_ = false;
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_TIME_ACCOUNT_H_
