// The stall rule: which ranks are alive but stuck while the others wait for them.
//
// A rank is STALLED when all of these hold:
//   - it is still working (not in a final state) and reported a working phase: data, forward,
//     backward, optimizer, checkpoint or eval (a rank that reported no phase is never judged);
//   - another working rank waits for its peers: in a collective (allreduce) or in recovery;
//   - both have lasted longer than the rank's budget (the stall is the time they overlap):
//       the step budget T: StallOptions::timeout (--stall-timeout) when set, else
//       max(floor, pace_multiple x the job's median step time) (step_pace.h), by default
//       max(60 s, 20 x median step), and the floor alone until a step time is known;
//       long_phase_multiple x T (10 x by default) for what is legitimately long: a rank's first
//       step (no step completed since it joined), checkpoint and eval.
// Ranks that all work (a slow shared file system) or all wait (a network hang: the process
// group's own --pg-timeout ends that) are not stalled by this rule.
//
// For a stop that did not complete in time, Holdouts() names who holds it up without budgets.
//
// Thread safety: pure functions of their arguments on an immutable object.
#ifndef SLURM_DDP_COORDINATOR_JOB_STALL_RULE_H_
#define SLURM_DDP_COORDINATOR_JOB_STALL_RULE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/job_status.h"

namespace ddp {

// What a step phase means to the rule.
enum class PhaseRole {
  kUnknown,  // nothing reported
  kWorking,  // the rank itself is busy: judged
  kWaiting,  // the rank waits for its peers (a collective, recovery)
};
PhaseRole RoleOf(StepPhase phase);

struct StallOptions {
  absl::Duration timeout = absl::ZeroDuration();  // zero: derived from the job's pace
  absl::Duration floor = absl::Seconds(60);
  double pace_multiple = 20;
  double long_phase_multiple = 10;
};

// One rank as the rule sees it.
struct RankView {
  int rank = -1;
  bool working = false;  // not in a final state
  StepPhase phase = StepPhase::kNone;
  absl::Duration in_phase;  // time in `phase` so far
  bool first_step = false;  // has not reported a completed step since it joined
};

struct Stall {
  int rank = -1;
  StepPhase phase = StepPhase::kNone;
  absl::Duration in_phase;
  absl::Duration budget;          // zero for a holdout (no budget applies)
  std::vector<PhaseCount> peers;  // the other working ranks, by phase
};

class StallRule {
 public:
  explicit StallRule(StallOptions options) : options_(options) {}

  // T: the budget of an ordinary step phase, given the job's median step time (if known).
  absl::Duration StepBudget(std::optional<absl::Duration> median) const;
  // The budget that applies to `rank` in its phase now.
  absl::Duration BudgetFor(const RankView& rank, std::optional<absl::Duration> median) const;
  // Every stalled rank, longest in its phase first (ties: lowest rank).
  std::vector<Stall> Find(const std::vector<RankView>& ranks,
                          std::optional<absl::Duration> median) const;
  // Who holds up a collective agreement (a stop), whatever the budgets: the working ranks in a
  // working phase while a peer waits, longest first; when there are none, every working rank.
  static std::vector<Stall> Holdouts(const std::vector<RankView>& ranks);

  const StallOptions& options() const { return options_; }

 private:
  const StallOptions options_;
};

// "<who> <verb> in data for 62.0s (budget 1m; peers: 3 in allreduce)", e.g. with who "rank 3
// (host h, ...)" and verb "stalled".
std::string DescribeStall(const Stall& stall, const std::string& who, const std::string& verb);

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_STALL_RULE_H_
