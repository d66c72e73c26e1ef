#include "coordinator/job/lifecycle.h"

#include <utility>

#include "coordinator/job/failure_causes.h"

namespace ddp {
namespace {

struct Move {
  JobState from;
  JobState to;
};

// Every allowed move. FAILED, SUCCEEDED and STOPPED are terminal.
constexpr Move kMoves[] = {
    {JobState::kRegistering, JobState::kRunning}, {JobState::kRegistering, JobState::kFailed},
    {JobState::kRunning, JobState::kRecovering},  {JobState::kRunning, JobState::kStopping},
    {JobState::kRunning, JobState::kSucceeded},   {JobState::kRunning, JobState::kFailed},
    {JobState::kRecovering, JobState::kRunning},  {JobState::kRecovering, JobState::kStopping},
    {JobState::kRecovering, JobState::kFailed},   {JobState::kStopping, JobState::kStopped},
    {JobState::kStopping, JobState::kFailed},     {JobState::kStopping, JobState::kRecovering},
};

}  // namespace

bool Lifecycle::Allowed(JobState from, JobState to) {
  for (const Move& m : kMoves) {
    if (m.from == from && m.to == to) return true;
  }
  return false;
}

Command Lifecycle::command() const {
  if (exit_ordered()) return Command::kExit;
  switch (state_) {
    case JobState::kFailed:
      return Command::kAbort;
    case JobState::kStopping:
    case JobState::kStopped:
      return Command::kCheckpointAndStop;
    case JobState::kRecovering:
      return stop_requested() ? Command::kCheckpointAndStop : Command::kContinue;
    default:
      return Command::kContinue;
  }
}

bool Lifecycle::MoveTo(JobState next) {
  if (!Allowed(state_, next)) return false;
  state_ = next;
  return true;
}

bool Lifecycle::Start() { return MoveTo(JobState::kRunning); }

bool Lifecycle::Succeed() { return MoveTo(JobState::kSucceeded); }

bool Lifecycle::RequestStop(const std::string& reason) {
  if (state_ == JobState::kStopping) return true;
  if (state_ == JobState::kRecovering) {
    if (stop_reason_.empty()) stop_reason_ = reason;
    return true;
  }
  if (!MoveTo(JobState::kStopping)) return false;
  stop_reason_ = reason;
  return true;
}

bool Lifecycle::BeginRecovery() { return MoveTo(JobState::kRecovering); }

bool Lifecycle::EndRecovery() {
  if (state_ != JobState::kRecovering) return false;
  return MoveTo(stop_requested() ? JobState::kStopping : JobState::kRunning);
}

bool Lifecycle::FinishStop() { return MoveTo(JobState::kStopped); }

bool Lifecycle::Fail(const FailureCause& cause, absl::Time revisable_until) {
  if (!MoveTo(JobState::kFailed)) return false;
  failure_ = cause;
  revisable_until_ = revisable_until;
  return true;
}

bool Lifecycle::Reattribute(const FailureCause& root, absl::Time now) {
  if (state_ != JobState::kFailed || failure_.rank == root.rank || now > revisable_until_) {
    return false;
  }
  failure_ = RootCause(root, failure_);
  revisable_until_ = absl::InfinitePast();
  return true;
}

// The rule is the status JSON's (common/job_status.h), decided once.
int Lifecycle::ExitCode() const { return JobExitCode(state_); }

bool Lifecycle::RankDone(int ranks) {
  if (++ranks_done_ < ranks) return false;
  return Succeed() || FinishStop();
}

void Lifecycle::Stamp(absl::Time now) {
  if (state_ == JobState::kRunning && running_since_ == absl::InfiniteFuture()) {
    running_since_ = now;
  }
  if (state_ == JobState::kStopping && stopping_since_ == absl::InfiniteFuture()) {
    stopping_since_ = now;
  }
}

void Lifecycle::Suspended(absl::Duration gap) {
  if (state_ == JobState::kRegistering) registration_suspended_ += gap;
  if (stopping_since_ != absl::InfiniteFuture()) stopping_since_ += gap;
}

bool Lifecycle::EndStopResumable(const std::string& note) {
  stop_note_ = note;
  OrderExit(note);
  return FinishStop();
}

}  // namespace ddp
