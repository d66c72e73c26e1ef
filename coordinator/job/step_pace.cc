#include "coordinator/job/step_pace.h"

#include <algorithm>

namespace ddp {

StepPace::StepPace(int num_ranks) : ranks_(static_cast<size_t>(std::max(0, num_ranks))) {}

void StepPace::Observe(int rank, int64_t step, absl::Time now) {
  if (rank < 0 || static_cast<size_t>(rank) >= ranks_.size()) return;
  Rank& r = ranks_[static_cast<size_t>(rank)];
  if (!r.seen || step < r.step) {
    r = Rank{true, step, now};
    return;
  }
  if (step == r.step) return;
  const absl::Duration sample = (now - r.at) / static_cast<double>(step - r.step);
  if (window_.size() < kWindow) {
    window_.push_back(sample);
  } else {
    window_[next_] = sample;
  }
  next_ = (next_ + 1) % kWindow;
  r.step = step;
  r.at = now;
}

void StepPace::Reset(int rank) {
  if (rank < 0 || static_cast<size_t>(rank) >= ranks_.size()) return;
  ranks_[static_cast<size_t>(rank)] = Rank{};
}

std::optional<absl::Duration> StepPace::median() const {
  if (window_.empty()) return std::nullopt;
  std::vector<absl::Duration> sorted = window_;
  auto mid = sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2);
  std::nth_element(sorted.begin(), mid, sorted.end());
  return *mid;
}

}  // namespace ddp
