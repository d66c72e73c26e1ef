// Heartbeats: per rank the last time it was heard from, the progress it reported and its state
// (following its reported phase until a final state: done, stopped, failed, lost); which rank
// has gone silent past the heartbeat timeout; and the suspend-gap rule: when the coordinator
// itself was not running for longer than `suspend_threshold` between two ticks (`scontrol
// suspend` stops every process of a job, or the host paused), that time is not silence.
//
// Thread safety: thread-safe. Each rank has its own lock, so heartbeats of different ranks never
// contend; Start() must happen before any per-rank call (the owner publishes the world after it).
#ifndef SLURM_DDP_COORDINATOR_JOB_LIVENESS_H_
#define SLURM_DDP_COORDINATOR_JOB_LIVENESS_H_

#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/coordinator_api.h"
#include "common/job_status.h"

namespace ddp {

// One rank as liveness sees it.
struct RankSample {
  RankState state = RankState::kStarting;
  ProgressReport progress;
  absl::Duration since_seen;  // since its last heartbeat (or the world's completion)
};

// A rank found silent: it is now kLost.
struct SilentRank {
  int rank = -1;
  absl::Duration silent;
};

// The rank state that follows a reported phase.
RankState RankStateOf(WorkerPhase phase);

class Liveness {
 public:
  // `start`: when the first tick period begins. An infinite threshold counts every gap.
  Liveness(absl::Duration heartbeat_timeout, absl::Duration suspend_threshold, absl::Time start);
  Liveness(const Liveness&) = delete;
  Liveness& operator=(const Liveness&) = delete;

  // Creates `num_ranks` slots, all heard from at `now`. Once.
  void Start(int num_ranks, absl::Time now);
  int num_ranks() const { return num_ranks_; }

  // A heartbeat: records the progress; the rank's state follows its phase unless it is final or
  // `aborting` (the job failed: the state no longer moves).
  void Beat(int rank, const ProgressReport& progress, absl::Time now, bool aborting);
  // Moves `rank` to a final state. With `reported` (ReportDone), returns false when a report was
  // already received (a retry: nothing changes); `now` counts as heard from.
  bool Finish(int rank, RankState final_state, bool reported, absl::Time now);
  // A new worker took `rank`'s place (in-job recovery): the rank starts over, heard from at
  // `now`, with no progress and no report yet.
  void Revive(int rank, absl::Time now);
  // The lowest-numbered rank, not in a final state, silent for longer than the heartbeat
  // timeout at `now`; it becomes kLost. nullopt when none.
  std::optional<SilentRank> TakeSilent(absl::Time now);
  // Call once per tick. When more than the suspend threshold passed since the previous tick,
  // returns that gap and moves every rank's last heartbeat forward by it (never past `now`).
  std::optional<absl::Duration> ObserveTick(absl::Time now);
  RankSample Sample(int rank, absl::Time now) const;

 private:
  struct Slot {
    mutable absl::Mutex mu;
    absl::Time last_seen ABSL_GUARDED_BY(mu);
    ProgressReport progress ABSL_GUARDED_BY(mu);
    RankState state ABSL_GUARDED_BY(mu) = RankState::kStarting;
    bool reported ABSL_GUARDED_BY(mu) = false;  // ReportDone received
  };
  Slot& slot(int rank) const { return slots_[static_cast<size_t>(rank)]; }

  const absl::Duration heartbeat_timeout_;
  const absl::Duration suspend_threshold_;
  // Written once by Start() before the owner publishes the world; the array is read-only after.
  std::unique_ptr<Slot[]> slots_;
  int num_ranks_ = 0;
  absl::Mutex tick_mu_;
  absl::Time last_tick_ ABSL_GUARDED_BY(tick_mu_);
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_LIVENESS_H_
