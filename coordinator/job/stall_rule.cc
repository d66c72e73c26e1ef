#include "coordinator/job/stall_rule.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ddp {
namespace {

// The other working ranks, by phase (in kAllStepPhases order).
std::vector<PhaseCount> PeersOf(const std::vector<RankView>& ranks, int rank) {
  std::vector<PhaseCount> out;
  for (StepPhase phase : kAllStepPhases) {
    int n = 0;
    for (const RankView& r : ranks) n += r.working && r.rank != rank && r.phase == phase ? 1 : 0;
    if (n > 0) out.push_back({phase, n});
  }
  return out;
}

// The longest wait of a working rank other than `rank`; nullopt when none waits.
std::optional<absl::Duration> LongestPeerWait(const std::vector<RankView>& ranks, int rank) {
  std::optional<absl::Duration> longest;
  for (const RankView& r : ranks) {
    if (!r.working || r.rank == rank || RoleOf(r.phase) != PhaseRole::kWaiting) continue;
    if (!longest || r.in_phase > *longest) longest = r.in_phase;
  }
  return longest;
}

void SortLongestFirst(std::vector<Stall>* stalls) {
  std::sort(stalls->begin(), stalls->end(), [](const Stall& a, const Stall& b) {
    return a.in_phase != b.in_phase ? a.in_phase > b.in_phase : a.rank < b.rank;
  });
}

}  // namespace

PhaseRole RoleOf(StepPhase phase) {
  switch (phase) {
    case StepPhase::kNone:
      return PhaseRole::kUnknown;
    case StepPhase::kAllreduce:
    case StepPhase::kRecovery:
      return PhaseRole::kWaiting;
    case StepPhase::kData:
    case StepPhase::kForward:
    case StepPhase::kBackward:
    case StepPhase::kOptimizer:
    case StepPhase::kCheckpoint:
    case StepPhase::kEval:
      return PhaseRole::kWorking;
  }
  return PhaseRole::kUnknown;
}

absl::Duration StallRule::StepBudget(std::optional<absl::Duration> median) const {
  if (options_.timeout > absl::ZeroDuration()) return options_.timeout;
  if (!median) return options_.floor;
  return std::max(options_.floor, *median * options_.pace_multiple);
}

absl::Duration StallRule::BudgetFor(const RankView& rank,
                                    std::optional<absl::Duration> median) const {
  const absl::Duration t = StepBudget(median);
  const bool long_phase =
      rank.first_step || rank.phase == StepPhase::kCheckpoint || rank.phase == StepPhase::kEval;
  return long_phase ? t * options_.long_phase_multiple : t;
}

std::vector<Stall> StallRule::Find(const std::vector<RankView>& ranks,
                                   std::optional<absl::Duration> median) const {
  std::vector<Stall> out;
  for (const RankView& r : ranks) {
    if (!r.working || RoleOf(r.phase) != PhaseRole::kWorking) continue;
    const std::optional<absl::Duration> wait = LongestPeerWait(ranks, r.rank);
    if (!wait) continue;
    const absl::Duration budget = BudgetFor(r, median);
    if (std::min(r.in_phase, *wait) <= budget) continue;
    out.push_back({r.rank, r.phase, r.in_phase, budget, PeersOf(ranks, r.rank)});
  }
  SortLongestFirst(&out);
  return out;
}

std::vector<Stall> StallRule::Holdouts(const std::vector<RankView>& ranks) {
  std::vector<Stall> out;
  for (const RankView& r : ranks) {
    if (!r.working || RoleOf(r.phase) != PhaseRole::kWorking) continue;
    if (!LongestPeerWait(ranks, r.rank)) continue;
    out.push_back({r.rank, r.phase, r.in_phase, absl::ZeroDuration(), PeersOf(ranks, r.rank)});
  }
  if (out.empty()) {
    for (const RankView& r : ranks) {
      if (r.working) {
        out.push_back({r.rank, r.phase, r.in_phase, absl::ZeroDuration(), PeersOf(ranks, r.rank)});
      }
    }
  }
  SortLongestFirst(&out);
  return out;
}

std::string DescribeStall(const Stall& stall, const std::string& who, const std::string& verb) {
  std::vector<std::string> peers;
  for (const PhaseCount& c : stall.peers) {
    peers.push_back(absl::StrCat(c.ranks, " in ", StepPhaseName(c.phase)));
  }
  std::string out = absl::StrFormat("%s %s in %s for %.1fs", who, verb, StepPhaseName(stall.phase),
                                    absl::ToDoubleSeconds(stall.in_phase));
  std::vector<std::string> notes;
  if (stall.budget > absl::ZeroDuration()) {
    notes.push_back(absl::StrCat("budget ", absl::FormatDuration(stall.budget)));
  }
  if (!peers.empty()) notes.push_back(absl::StrCat("peers: ", absl::StrJoin(peers, ", ")));
  if (!notes.empty()) absl::StrAppend(&out, " (", absl::StrJoin(notes, "; "), ")");
  return out;
}

}  // namespace ddp
