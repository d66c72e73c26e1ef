#include "common/job_status.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

#include "absl/strings/str_format.h"
#include "common/exit_codes.h"

namespace ddp {

const char* JobStateName(JobState state) {
  switch (state) {
    case JobState::kRegistering:
      return "REGISTERING";
    case JobState::kRunning:
      return "RUNNING";
    case JobState::kRecovering:
      return "RECOVERING";
    case JobState::kStopping:
      return "STOPPING";
    case JobState::kStopped:
      return "STOPPED";
    case JobState::kSucceeded:
      return "SUCCEEDED";
    case JobState::kFailed:
      return "FAILED";
  }
  return "UNKNOWN";
}

const char* JobStateJsonName(JobState state) {
  return state == JobState::kStopped ? JobStateName(JobState::kStopping) : JobStateName(state);
}

bool IsTerminal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kStopped || state == JobState::kFailed;
}

const char* RankStateName(RankState state) {
  switch (state) {
    case RankState::kRegistered:
      return "registered";
    case RankState::kStarting:
      return "starting";
    case RankState::kTraining:
      return "training";
    case RankState::kEvaluating:
      return "evaluating";
    case RankState::kCheckpointing:
      return "checkpointing";
    case RankState::kFinished:
      return "finished";
    case RankState::kDone:
      return "done";
    case RankState::kStopped:
      return "stopped";
    case RankState::kFailed:
      return "failed";
    case RankState::kLost:
      return "lost";
    case RankState::kStalled:
      return "stalled";
  }
  return "unknown";
}

bool IsFinal(RankState state) {
  return state == RankState::kDone || state == RankState::kStopped || state == RankState::kFailed ||
         state == RankState::kLost;
}

const char* JournalConditionName(JournalCondition condition) {
  switch (condition) {
    case JournalCondition::kNone:
      return "none";
    case JournalCondition::kOk:
      return "ok";
    case JournalCondition::kStuck:
      return "stuck";
    case JournalCondition::kFailed:
      return "failed";
  }
  return "none";
}

const char* StepPhaseName(StepPhase phase) {
  switch (phase) {
    case StepPhase::kNone:
      return "none";
    case StepPhase::kData:
      return "data";
    case StepPhase::kForward:
      return "forward";
    case StepPhase::kBackward:
      return "backward";
    case StepPhase::kAllreduce:
      return "allreduce";
    case StepPhase::kOptimizer:
      return "optimizer";
    case StepPhase::kCheckpoint:
      return "checkpoint";
    case StepPhase::kEval:
      return "eval";
    case StepPhase::kRecovery:
      return "recovery";
  }
  return "unknown";
}

const char* RankFlagName(RankFlag flag) {
  // In the order of the enum (kAllRankFlags).
  static constexpr const char* kNames[] = {"none",   "failed", "lost",     "stalled",
                                           "silent", "behind", "straggler"};
  static_assert(std::size(kNames) == std::size(kAllRankFlags));
  const auto i = static_cast<size_t>(flag);
  return i < std::size(kNames) ? kNames[i] : "unknown";
}

const char* StepSectionName(StepSection section) {
  switch (section) {
    case StepSection::kData:
      return "data";
    case StepSection::kCompute:
      return "compute";
    case StepSection::kCommunication:
      return "communication";
    case StepSection::kOptimizer:
      return "optimizer";
  }
  return "unknown";
}

std::string StragglerReason(const StragglerReport& s) {
  const std::string slower = s.slower > 0 ? absl::StrFormat("%.1fx slower", s.slower) : "slower";
  return absl::StrFormat("%s %s than the best rank for %.0f s (relative score %.2f)",
                         StepSectionName(s.section), slower, s.seconds, s.relative_score);
}

bool operator==(const RankScore& a, const RankScore& b) {
  return a.measured == b.measured && a.relative == b.relative && a.individual == b.individual &&
         std::equal(std::begin(a.sections), std::end(a.sections), std::begin(b.sections)) &&
         a.straggler == b.straggler;
}

int64_t MedianStep(const JobStatus& s) {
  std::vector<int64_t> steps;
  steps.reserve(s.ranks.size());
  for (const RankStatus& r : s.ranks) {
    if (!IsFinal(r.state) && r.rank >= 0) steps.push_back(r.step);
  }
  if (steps.empty()) return 0;
  auto mid = steps.begin() + static_cast<std::ptrdiff_t>((steps.size() - 1) / 2);
  std::nth_element(steps.begin(), mid, steps.end());
  return *mid;
}

RankVerdict JudgeRank(const RankStatus& r, int64_t median_step) {
  RankVerdict v;
  v.final = IsFinal(r.state);
  if (r.state == RankState::kFailed) v.flag = RankFlag::kFailed;
  if (r.state == RankState::kLost) v.flag = RankFlag::kLost;
  if (v.final || r.rank < 0) return v;
  int64_t gap = 0;  // saturates: steps come from workers and may be anything
  if (__builtin_sub_overflow(median_step, r.step, &gap)) {
    gap = r.step < 0 ? INT64_MAX : INT64_MIN;
  }
  if (gap > std::max<int64_t>(2, median_step / 100)) v.behind_by = gap;
  if (r.state == RankState::kStalled) {
    v.flag = RankFlag::kStalled;
  } else if (r.last_seen_seconds > 2 * kHeartbeatPeriodSeconds) {
    v.flag = RankFlag::kSilent;
  } else if (r.score.straggler) {
    v.flag = RankFlag::kStraggler;
  } else if (v.behind_by > 0) {
    v.flag = RankFlag::kBehind;
  }
  return v;
}

int JobExitCode(JobState state) {
  if (state == JobState::kSucceeded) return kExitOk;
  return state == JobState::kStopped ? kExitResumable : kExitFailed;
}

void DecideStatus(JobStatus* s) {
  const int64_t median = MedianStep(*s);
  for (RankStatus& r : s->ranks) {
    const RankVerdict v = JudgeRank(r, median);
    r.flag = v.flag;
    r.behind_by = v.behind_by;
    r.final = v.final;
  }
  s->exit_code = IsTerminal(s->state) ? JobExitCode(s->state) : -1;
}

}  // namespace ddp
