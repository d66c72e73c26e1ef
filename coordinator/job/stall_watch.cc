#include "coordinator/job/stall_watch.h"

#include <algorithm>
#include <utility>

namespace ddp {

StallWatch::StallWatch(StallOptions options, int world_size, absl::Time start)
    : rule_(options), pace_(world_size), counted_since_(start) {}

RankView StallWatch::View(int rank, const RankSample& sample, absl::Time now, bool observe) {
  const ProgressReport& p = sample.progress;
  RankView v;
  v.rank = rank;
  v.working = !IsFinal(sample.state) && sample.state != RankState::kFinished;
  v.phase = p.step_phase;
  v.in_phase = std::min(absl::Seconds(p.phase_seconds) + sample.since_seen, now - counted_since_);
  v.first_step = p.phase == WorkerPhase::kStarting;  // its first Update follows its first step
  if (observe && v.working && !v.first_step) pace_.Observe(rank, p.step, now);
  return v;
}

bool StallWatch::Due(absl::Time now) {
  if (now < next_check_) return false;
  next_check_ = now + kCheckPeriod;
  return true;
}

std::vector<Stall> StallWatch::Judge(const std::vector<RankView>& views) {
  std::vector<Stall> found = rule_.Find(views, pace_.median());
  std::vector<Stall> fresh;
  for (const Stall& st : found) {
    const bool known = std::any_of(stalls_.begin(), stalls_.end(),
                                   [&](const Stall& old) { return old.rank == st.rank; });
    if (!known) fresh.push_back(st);
  }
  stalls_ = std::move(found);
  return fresh;
}

void StallWatch::NewGeneration(absl::Time now) {
  counted_since_ = now;
  stalls_.clear();
}

}  // namespace ddp
