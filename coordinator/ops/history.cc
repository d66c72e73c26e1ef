#include "coordinator/ops/history.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ddp {
namespace {

std::string Num(double v) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.6g", v);
}

}  // namespace

History::History(size_t capacity, double interval_seconds)
    : capacity_(std::max<size_t>(capacity, 4)), interval_(std::max(interval_seconds, 1e-3)) {}

void History::Add(const JobStatus& s) {
  if (s.state == JobState::kRegistering) return;
  // Nothing to chart until some rank reported progress.
  if (s.step == 0 && s.loss == 0 && s.samples_per_second == 0 && !s.finished) return;
  absl::MutexLock lock(&mu_);
  if (ended_) return;
  if (!samples_.empty() && s.uptime_seconds - samples_.back().t < interval_ && !s.finished) return;
  ended_ = s.finished;
  samples_.push_back({s.uptime_seconds, s.step, s.epoch, s.loss, s.samples_per_second, s.time_use});
  if (samples_.size() >= capacity_) {
    // Keep every other sample (and always the newest), double the spacing.
    std::vector<Sample> kept;
    kept.reserve(capacity_ / 2 + 1);
    for (size_t i = 0; i + 1 < samples_.size(); i += 2) kept.push_back(samples_[i]);
    kept.push_back(samples_.back());
    samples_.swap(kept);
    interval_ *= 2;
  }
}

std::vector<History::Sample> History::Samples() const {
  absl::MutexLock lock(&mu_);
  return samples_;
}

std::string History::ToJson() const {
  absl::MutexLock lock(&mu_);
  std::string t, step, epoch, loss, sps;
  for (size_t i = 0; i < samples_.size(); ++i) {
    const char* sep = i == 0 ? "" : ",";
    const Sample& x = samples_[i];
    absl::StrAppend(&t, sep, Num(x.t));
    absl::StrAppend(&step, sep, x.step);
    absl::StrAppend(&epoch, sep, x.epoch);
    absl::StrAppend(&loss, sep, Num(x.loss));
    absl::StrAppend(&sps, sep, Num(x.samples_per_second));
  }
  // Time use: one array per use, in the status JSON's order and words.
  using Field = double TimeUse::*;
  static constexpr std::pair<const char*, Field> kUses[] = {{"wall", &TimeUse::wall},
                                                            {"training", &TimeUse::training},
                                                            {"startup", &TimeUse::startup},
                                                            {"recoveries", &TimeUse::recovery},
                                                            {"stalls", &TimeUse::stall},
                                                            {"checkpoints", &TimeUse::checkpoint},
                                                            {"evaluation", &TimeUse::evaluation},
                                                            {"other", &TimeUse::other}};
  std::string uses;
  for (const auto& [name, field] : kUses) {
    absl::StrAppend(&uses, uses.empty() ? "" : ",", "\"", name, "\":[");
    for (size_t i = 0; i < samples_.size(); ++i) {
      absl::StrAppend(&uses, i == 0 ? "" : ",", Num(samples_[i].time_use.*field));
    }
    uses.push_back(']');
  }
  return absl::StrCat("{\"interval_seconds\":", Num(interval_), ",\"t\":[", t, "],\"step\":[", step,
                      "],\"epoch\":[", epoch, "],\"loss\":[", loss, "],\"samples_per_second\":[",
                      sps, "],\"time_use\":{", uses, "}}");
}

}  // namespace ddp
