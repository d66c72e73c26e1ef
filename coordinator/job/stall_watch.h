// The job's stall watch (docs/architecture.md, "Stall"): when the stall rule (stall_rule.h) is
// applied next (at most every kCheckPeriod), since when time in a phase counts (the coordinator
// was not running before it, or a new membership generation formed then), the job's pace
// (step_pace.h), and the stalls as last judged (kept once the job finished, for its status). It
// decides nothing about what a stall does: Job asks it who is stalled and acts.
//
//   StallWatch w(options, /*world_size=*/4, start);
//   if (w.Due(now)) {
//     std::vector<RankView> views;  // one w.View(rank, sample, now, /*observe=*/true) per rank
//     for (const Stall& fresh : w.Judge(views)) ...   // w.stalls(): every stalled rank
//   }
//   w.NewGeneration(now);                               // no stall; phases count from now
//
// Thread safety: none; the owner (Job) calls it under its lock.
#ifndef SLURM_DDP_COORDINATOR_JOB_STALL_WATCH_H_
#define SLURM_DDP_COORDINATOR_JOB_STALL_WATCH_H_

#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "coordinator/job/liveness.h"
#include "coordinator/job/stall_rule.h"
#include "coordinator/job/step_pace.h"

namespace ddp {

class StallWatch {
 public:
  static constexpr absl::Duration kCheckPeriod = absl::Milliseconds(500);

  // `start`: the job's start (time in a phase counts from it at the earliest).
  StallWatch(StallOptions options, int world_size, absl::Time start);

  // `rank` as the stall rule sees it at `now`, from its liveness sample: its time in its phase,
  // but none from before counted_since(). With `observe`, a working rank past its first step
  // feeds the job's pace with its step.
  RankView View(int rank, const RankSample& sample, absl::Time now, bool observe);
  // Whether the rule is due at `now`; when it is, the next check is kCheckPeriod later.
  bool Due(absl::Time now);
  // Applies the rule to `views` with the job's pace: stalls() is what it finds. Returns the
  // stalls of ranks that were not stalled at the last judgement, in the rule's order.
  std::vector<Stall> Judge(const std::vector<RankView>& views);
  // A stop ends held up by `holdouts`: they are the stalls from now on.
  void Hold(std::vector<Stall> holdouts) { stalls_ = std::move(holdouts); }
  // Time in a phase before `now` counts for nothing (the coordinator was not running).
  void CountFrom(absl::Time now) { counted_since_ = now; }
  // A new membership generation is complete at `now`: no rank is stalled, and its rendezvous and
  // state sync are not a stall (time in a phase counts from now).
  void NewGeneration(absl::Time now);
  // `rank` is renumbered (the job shrank): its pace starts afresh.
  void ResetPace(int rank) { pace_.Reset(rank); }

  absl::Time counted_since() const { return counted_since_; }
  const std::vector<Stall>& stalls() const { return stalls_; }

 private:
  const StallRule rule_;
  StepPace pace_;
  std::vector<Stall> stalls_;  // as last judged
  absl::Time next_check_;
  absl::Time counted_since_;
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_STALL_WATCH_H_
