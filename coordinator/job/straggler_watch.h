// The job's straggler watch (docs/operations.md, "Stragglers"): scores every rank on the section
// times its heartbeats carry (ProgressReport::sections, cumulative since the worker started)
// over a recent span of its steps, and names the stragglers with hysteresis. It decides nothing
// about what a straggler does: Job asks it who is one and reports it (--straggler-action warn).
//
// The rule. In synchronous DDP every rank's step takes the same wall time: the slow rank's
// peers wait for it in the gradient allreduce, so the rank that waits least is the slow one and
// its peers' exposed communication grows by what it is late. A rank is therefore judged on its
// busy time per step, the step less its exposed communication (data + compute + optimizer):
//   relative score   = the smallest busy time per step among the scored ranks / its own
//   individual score = its own smallest busy time per step so far / its current one
//   section score    = the smallest time per step in that section among the ranks / its own
// over the steps of the last span() (a third of the window, at most 10 s). A rank whose relative
// score stays under `threshold` for `window` is a straggler; its cause is the working section
// (data, compute or optimizer; never communication, which is the others' symptom) whose time
// per step exceeds the best rank's by the most. It clears once its relative score has been at or
// above the threshold for span(). One slow step (a long pause, a slow batch) leaves the span
// after span() < window, so it is never a straggler; checkpoint, evaluation and recovery time
// counts in no section. A rank is scored only with at least kMinSteps steps in the span (which
// ends at its latest sample), the latest no older than the span plus one evidence period (new
// totals arrive once per heartbeat interval, and a stopped or busy worker's heartbeat comes
// late: a short span must not lose a rank between two heartbeats), and only while two or more
// ranks are scored.
//
//   StragglerWatch w({0.75, absl::Seconds(30)});
//   w.Observe(rank, sample.progress.sections, /*working=*/true, now);  // each rank, each check
//   for (const StragglerWatch::Change& c : w.Judge(now)) ...            // named or cleared
//   w.Reset();                                                          // a new rank table
//
// Thread safety: none; the owner (Job) calls it under its lock.
#ifndef SLURM_DDP_COORDINATOR_JOB_STRAGGLER_WATCH_H_
#define SLURM_DDP_COORDINATOR_JOB_STRAGGLER_WATCH_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "common/coordinator_api.h"
#include "common/job_status.h"

namespace ddp {

// What naming a straggler does besides reporting it (--straggler-action; docs/operations.md,
// "Acting on a straggler"): nothing more, hand its node to a spare standing by, or write the
// node to the exclude list beside the dist_file for the next allocation.
enum class StragglerAction { kWarn, kReplace, kExclude };

// "warn", "replace", "exclude".
const char* StragglerActionName(StragglerAction action);

struct StragglerOptions {
  double threshold = 0.75;                          // --straggler-threshold
  absl::Duration window = absl::Seconds(30);        // --straggler-window
  StragglerAction action = StragglerAction::kWarn;  // --straggler-action
};

// A straggler as the watch sees it (the status adds host and node).
struct Straggler {
  int rank = -1;
  StepSection section = StepSection::kCompute;
  double relative_score = 1.0;
  double slower = 1.0;  // its time per step in `section` over the best rank's
  absl::Time since;     // when its relative score went under the threshold
};

class StragglerWatch {
 public:
  static constexpr int64_t kMinSteps = 2;
  static constexpr absl::Duration kCheckPeriod = absl::Milliseconds(500);

  // `evidence_period`: how often a rank's new totals arrive, the job's heartbeat interval
  // (Job::HeartbeatInterval).
  explicit StragglerWatch(StragglerOptions options,
                          absl::Duration evidence_period = absl::Seconds(1));

  // The span of recent steps scored: window / 3, within [0.5 s, 10 s].
  absl::Duration span() const { return span_; }
  // A rank whose latest new totals are older than this is not scored (no step lately): the span
  // plus one evidence period plus one check period.
  absl::Duration stale_after() const { return stale_after_; }
  const StragglerOptions& options() const { return options_; }

  // `rank`'s section totals at `now`; `working`: it still trains (a rank that does not is
  // neither scored nor a straggler). Totals that go back (a new worker in the slot) start its
  // history afresh.
  void Observe(int rank, const SectionTotals& totals, bool working, absl::Time now);

  // A rank named a straggler (appeared) or no longer one.
  struct Change {
    Straggler straggler;
    bool appeared = true;
  };
  // Scores the ranks observed at `now` and applies the rule: the changes, in rank order.
  std::vector<Change> Judge(absl::Time now);
  // Whether Judge is due at `now`; when it is, the next one is kCheckPeriod later.
  bool Due(absl::Time now);
  // A new rank table: every history, score and straggler is dropped.
  void Reset() { ranks_.clear(); }

  // Each rank's scores as last judged (unmeasured for ranks never observed).
  RankScore Score(int rank) const;
  std::vector<Straggler> stragglers() const;
  // Where a step's time goes, as last judged (rank -1: not measured).
  const StepBreakdown& breakdown() const { return breakdown_; }

 private:
  struct Sample {
    absl::Time at;
    SectionTotals totals;
  };
  struct Track {
    std::deque<Sample> samples;  // one per new step count; the oldest at or before last - span
    bool working = false;
    bool measured = false;
    double per_step[kNumStepSections] = {0, 0, 0, 0};  // seconds per step over the span
    double busy = 0;                                   // data + compute + optimizer
    double best_busy = 0;                              // its smallest busy so far (0: none)
    RankScore score;
    std::optional<absl::Time> below_since;  // relative score under the threshold since
    std::optional<absl::Time> above_since;  // a straggler's score back at or above since
    Straggler straggler;                    // valid while score.straggler
  };

  Track& At(int rank);
  // The per-step times over the span ending at the latest sample; false when too few steps or
  // the latest is older than stale_after().
  bool Measure(Track& t, absl::Time now) const;
  // The section whose time exceeds the best rank's the most, and how many times the best it is.
  static void Cause(const Track& t, const double best[kNumStepSections], Straggler* s);

  const StragglerOptions options_;
  const absl::Duration span_;
  const absl::Duration stale_after_;
  std::vector<Track> ranks_;
  StepBreakdown breakdown_;
  absl::Time next_check_ = absl::InfinitePast();
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_STRAGGLER_WATCH_H_
