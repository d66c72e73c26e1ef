#include "coordinator/job/liveness.h"

#include <algorithm>

namespace ddp {

RankState RankStateOf(WorkerPhase phase) {
  switch (phase) {
    case WorkerPhase::kStarting:
      return RankState::kStarting;
    case WorkerPhase::kTraining:
      return RankState::kTraining;
    case WorkerPhase::kEvaluating:
      return RankState::kEvaluating;
    case WorkerPhase::kCheckpointing:
      return RankState::kCheckpointing;
    case WorkerPhase::kFinished:
      return RankState::kFinished;
  }
  return RankState::kStarting;
}

Liveness::Liveness(absl::Duration heartbeat_timeout, absl::Duration suspend_threshold,
                   absl::Time start)
    : heartbeat_timeout_(heartbeat_timeout),
      suspend_threshold_(suspend_threshold),
      last_tick_(start) {}

void Liveness::Start(int num_ranks, absl::Time now) {
  slots_ = std::make_unique<Slot[]>(static_cast<size_t>(num_ranks));
  num_ranks_ = num_ranks;
  for (int r = 0; r < num_ranks; ++r) {
    absl::MutexLock lock(&slot(r).mu);
    slot(r).last_seen = now;
  }
}

void Liveness::Beat(int rank, const ProgressReport& progress, absl::Time now, bool aborting) {
  Slot& s = slot(rank);
  absl::MutexLock lock(&s.mu);
  s.last_seen = now;
  s.progress = progress;
  if (!IsFinal(s.state) && !aborting) s.state = RankStateOf(progress.phase);
}

bool Liveness::Finish(int rank, RankState final_state, bool reported, absl::Time now) {
  Slot& s = slot(rank);
  absl::MutexLock lock(&s.mu);
  if (reported) {
    if (s.reported) return false;
    s.reported = true;
    s.last_seen = now;
  }
  s.state = final_state;
  return true;
}

void Liveness::Revive(int rank, absl::Time now) {
  Slot& s = slot(rank);
  absl::MutexLock lock(&s.mu);
  s.last_seen = now;
  s.progress = ProgressReport();
  s.state = RankState::kStarting;
  s.reported = false;
}

std::optional<SilentRank> Liveness::TakeSilent(absl::Time now) {
  for (int r = 0; r < num_ranks_; ++r) {
    Slot& s = slot(r);
    absl::MutexLock lock(&s.mu);
    if (IsFinal(s.state) || now - s.last_seen <= heartbeat_timeout_) continue;
    s.state = RankState::kLost;
    return SilentRank{r, now - s.last_seen};
  }
  return std::nullopt;
}

std::optional<absl::Duration> Liveness::ObserveTick(absl::Time now) {
  absl::Duration gap;
  {
    absl::MutexLock lock(&tick_mu_);
    gap = now - last_tick_;
    last_tick_ = now;
  }
  if (gap <= suspend_threshold_) return std::nullopt;
  for (int r = 0; r < num_ranks_; ++r) {
    absl::MutexLock lock(&slot(r).mu);
    slot(r).last_seen = std::min(slot(r).last_seen + gap, now);
  }
  return gap;
}

RankSample Liveness::Sample(int rank, absl::Time now) const {
  const Slot& s = slot(rank);
  absl::MutexLock lock(&s.mu);
  return RankSample{s.state, s.progress, now - s.last_seen};
}

}  // namespace ddp
