#include "coordinator/job/straggler_watch.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ddp {
namespace {

constexpr int kData = static_cast<int>(StepSection::kData);
constexpr int kCompute = static_cast<int>(StepSection::kCompute);
constexpr int kOptimizer = static_cast<int>(StepSection::kOptimizer);
// The sections a rank can be slow in by itself (communication is waiting for the others).
constexpr int kWorking[] = {kData, kCompute, kOptimizer};

// Times under this (seconds per step) are equal to nothing: a ratio of two of them is noise.
constexpr double kTiny = 1e-6;

double Ratio(double best, double own) { return own <= kTiny ? 1.0 : std::min(1.0, best / own); }

bool Sane(const SectionTotals& t) {
  if (t.steps < 0) return false;
  for (double v : t.seconds) {
    if (!std::isfinite(v) || v < 0) return false;
  }
  return true;
}

// `a` went back from `b`: a new worker's totals.
bool WentBack(const SectionTotals& a, const SectionTotals& b) {
  if (a.steps < b.steps) return true;
  for (int i = 0; i < kNumStepSections; ++i) {
    if (a.seconds[i] < b.seconds[i]) return true;
  }
  return false;
}

}  // namespace

const char* StragglerActionName(StragglerAction action) {
  switch (action) {
    case StragglerAction::kWarn:
      return "warn";
    case StragglerAction::kReplace:
      return "replace";
    case StragglerAction::kExclude:
      return "exclude";
  }
  return "warn";
}

StragglerWatch::StragglerWatch(StragglerOptions options, absl::Duration evidence_period)
    : options_(options),
      span_(std::clamp(options.window / 3, absl::Milliseconds(500), absl::Seconds(10))),
      stale_after_(span_ + std::max(evidence_period, absl::ZeroDuration()) + kCheckPeriod) {}

StragglerWatch::Track& StragglerWatch::At(int rank) {
  if (static_cast<size_t>(rank) >= ranks_.size()) ranks_.resize(static_cast<size_t>(rank) + 1);
  return ranks_[static_cast<size_t>(rank)];
}

void StragglerWatch::Observe(int rank, const SectionTotals& totals, bool working, absl::Time now) {
  if (rank < 0) return;
  Track& t = At(rank);
  t.working = working;
  if (!Sane(totals)) return;
  if (!t.samples.empty() && WentBack(totals, t.samples.back().totals)) {
    // A new worker: its history starts afresh; a straggler stays named until it is scored.
    t.samples.clear();
    t.best_busy = 0;
  }
  if (t.samples.empty() || totals.steps > t.samples.back().totals.steps) {
    t.samples.push_back({now, totals});
  }
  // Keep one sample at or before the latest's time - span (the span's base), none older. The span
  // ends at the latest sample, not at `now`: between two heartbeats the evidence stays whole.
  const absl::Time base = t.samples.back().at - span_;
  while (t.samples.size() >= 2 && t.samples[1].at <= base) t.samples.pop_front();
}

bool StragglerWatch::Measure(Track& t, absl::Time now) const {
  t.measured = false;
  if (!t.working || t.samples.size() < 2) return false;
  const Sample& last = t.samples.back();
  if (last.at < now - stale_after_) return false;  // no step lately: nothing new to judge
  const Sample& base = t.samples.front();
  const int64_t steps = last.totals.steps - base.totals.steps;
  if (steps < kMinSteps) return false;
  for (int i = 0; i < kNumStepSections; ++i) {
    t.per_step[i] = (last.totals.seconds[i] - base.totals.seconds[i]) / static_cast<double>(steps);
  }
  t.busy = t.per_step[kData] + t.per_step[kCompute] + t.per_step[kOptimizer];
  t.measured = true;
  return true;
}

void StragglerWatch::Cause(const Track& t, const double best[kNumStepSections], Straggler* s) {
  double excess = -std::numeric_limits<double>::infinity();
  for (int k : kWorking) {
    const double e = t.per_step[k] - best[k];
    if (e > excess) {
      excess = e;
      s->section = static_cast<StepSection>(k);
      s->slower = best[k] > kTiny ? t.per_step[k] / best[k] : 0.0;
    }
  }
}

bool StragglerWatch::Due(absl::Time now) {
  if (now < next_check_) return false;
  next_check_ = now + kCheckPeriod;
  return true;
}

std::vector<StragglerWatch::Change> StragglerWatch::Judge(absl::Time now) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  double best_busy = kInf;
  double best[kNumStepSections] = {kInf, kInf, kInf, kInf};
  double worst[kNumStepSections] = {0, 0, 0, 0};
  int measured = 0;
  int slowest = -1;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    Track& t = ranks_[r];
    if (!Measure(t, now)) continue;
    ++measured;
    best_busy = std::min(best_busy, t.busy);
    for (int i = 0; i < kNumStepSections; ++i) {
      best[i] = std::min(best[i], t.per_step[i]);
      worst[i] = std::max(worst[i], t.per_step[i]);
    }
    if (slowest < 0 || t.busy > ranks_[static_cast<size_t>(slowest)].busy) {
      slowest = static_cast<int>(r);
    }
  }
  const bool scored = measured >= 2;
  breakdown_ = StepBreakdown();
  if (scored) {
    breakdown_.rank = slowest;
    for (int i = 0; i < kNumStepSections; ++i) {
      breakdown_.seconds[i] = ranks_[static_cast<size_t>(slowest)].per_step[i];
      breakdown_.spread[i] = worst[i] - best[i];
    }
  }
  std::vector<Change> changes;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    Track& t = ranks_[r];
    const bool straggler = t.score.straggler;
    if (!t.working) {
      // A rank that no longer trains (done, lost, replaced) is no straggler.
      t.score = RankScore();
      t.below_since.reset();
      t.above_since.reset();
      if (straggler) changes.push_back({t.straggler, false});
      continue;
    }
    if (!scored || !t.measured) {
      // No new evidence: a straggler stays one, a score under the threshold starts again.
      t.score.measured = false;
      if (!straggler) t.below_since.reset();
      continue;
    }
    if (t.best_busy <= 0 || t.busy < t.best_busy) t.best_busy = t.busy;
    t.score.measured = true;
    t.score.relative = Ratio(best_busy, t.busy);
    t.score.individual = Ratio(t.best_busy, t.busy);
    for (int i = 0; i < kNumStepSections; ++i) t.score.sections[i] = Ratio(best[i], t.per_step[i]);
    if (t.score.relative < options_.threshold) {
      t.above_since.reset();
      if (!t.below_since) t.below_since = now;
      if (straggler || now - *t.below_since >= options_.window) {
        t.straggler.rank = static_cast<int>(r);
        t.straggler.relative_score = t.score.relative;
        t.straggler.since = *t.below_since;
        Cause(t, best, &t.straggler);
        t.score.straggler = true;
        if (!straggler) changes.push_back({t.straggler, true});
      }
      continue;
    }
    if (!straggler) {
      t.below_since.reset();
      continue;
    }
    if (!t.above_since) t.above_since = now;
    t.straggler.relative_score = t.score.relative;
    if (now - *t.above_since >= span_) {
      t.score.straggler = false;
      t.below_since.reset();
      t.above_since.reset();
      changes.push_back({t.straggler, false});
    }
  }
  return changes;
}

RankScore StragglerWatch::Score(int rank) const {
  if (rank < 0 || static_cast<size_t>(rank) >= ranks_.size()) return RankScore();
  RankScore s = ranks_[static_cast<size_t>(rank)].score;
  if (s.straggler) s.measured = true;  // named on evidence: its last scores stand
  return s;
}

std::vector<Straggler> StragglerWatch::stragglers() const {
  std::vector<Straggler> out;
  for (const Track& t : ranks_) {
    if (t.score.straggler) out.push_back(t.straggler);
  }
  return out;
}

}  // namespace ddp
