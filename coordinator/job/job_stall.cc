// Job's stall rule and stop deadline (docs/operations.md, "Stall detection"): which ranks are stuck
// while their peers wait, what a stall does (a restart left: the stalled rank is told to exit and
// its launcher replaces it; none: the job fails), a stop signal seen in a heartbeat, and a graceful
// stop that cannot complete. Same class and lock as job.cc.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/exit_codes.h"
#include "coordinator/job/failure_causes.h"
#include "coordinator/job/job.h"

namespace ddp {

void Job::StopSignaled(int rank) {
  Completions out;
  absl::MutexLock lock(&mu_);
  const JobState state = lifecycle_.state();
  if (state != JobState::kRunning && state != JobState::kRecovering) return;
  RequestGracefulStopLocked(absl::StrCat(membership_.Describe(rank), " received a stop signal"),
                            &out);
}

std::vector<RankView> Job::RankViewsLocked(absl::Time now, StepPace* pace) {
  std::vector<RankView> views;
  const int n = membership_.num_ranks();
  views.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const RankSample sample = liveness_.Sample(r, now);
    const ProgressReport& p = sample.progress;
    RankView v;
    v.rank = r;
    v.working = !IsFinal(sample.state) && sample.state != RankState::kFinished;
    v.phase = p.step_phase;
    v.in_phase = std::min(absl::Seconds(p.phase_seconds) + sample.since_seen, now - judged_since_);
    v.first_step = p.phase == WorkerPhase::kStarting;  // its first Update follows its first step
    if (pace != nullptr && v.working && !v.first_step) pace->Observe(r, p.step, now);
    views.push_back(v);
  }
  return views;
}

void Job::JudgeStallsLocked(absl::Time now, Completions* out) {
  if (now < next_stall_check_) return;
  next_stall_check_ = now + kStallCheckPeriod;
  const std::vector<RankView> views = RankViewsLocked(now, &pace_);
  std::vector<Stall> found = stall_rule_.Find(views, pace_.median());
  std::vector<std::string> described;
  for (const Stall& st : found) {
    described.push_back(DescribeStall(st, membership_.Describe(st.rank), "stalled"));
    const bool known = std::any_of(stalls_.begin(), stalls_.end(),
                                   [&](const Stall& old) { return old.rank == st.rank; });
    if (!known) EventLocked(described.back(), out);
  }
  stalls_ = std::move(found);
  if (stalls_.empty()) return;
  if (lifecycle_.state() == JobState::kStopping) {
    EndStopLocked(stalls_, "graceful stop cannot complete", out);
    return;
  }
  if (recovery_.CanRestart() && ranks_done_ == 0) {
    // In-job recovery: a restart is left, so only the stalled ranks are told to exit (their
    // heartbeat replies carry kExit; the heartbeat thread ends the process even though the
    // training thread is stuck). Each launcher reports its worker's end (ReportLost), which costs
    // the restart and replaces the rank, as for any lost rank. A rank whose heartbeat thread is
    // stuck too goes silent and is lost at the heartbeat timeout.
    for (size_t i = 0; i < stalls_.size(); ++i) OrderExitLocked(stalls_[i].rank, described[i], out);
    return;
  }
  // Without restarts the stall fails the job, naming the rank and its phase: every rank gets
  // kAbort, and a rank that cannot act on it is ended by its heartbeat thread (ProgressReporter's
  // abort_grace).
  FailLocked(CauseOfStall(stalls_.front().rank, absl::StrJoin(described, "; ")),
             absl::StatusCode::kDeadlineExceeded, absl::InfinitePast(), out);
}

void Job::OrderExitLocked(int rank, const std::string& why, Completions* out) {
  const int pid = membership_.who(rank).pid;
  const auto it = exit_orders_.find(rank);
  if (it != exit_orders_.end() && it->second.pid == pid) return;  // told already
  exit_orders_[rank] = ExitOrder{pid, absl::StrCat(why, "; told to exit to be replaced")};
  exit_orders_pending_.store(static_cast<int>(exit_orders_.size()), std::memory_order_release);
  EventLocked(absl::StrCat(membership_.Describe(rank),
                           " told to exit (stalled); its launcher replaces it, restart ",
                           recovery_.restarts() + 1, " of ", recovery_.max_restarts()),
              out);
}

void Job::ClearExitOrdersLocked() {
  exit_orders_.clear();
  exit_orders_pending_.store(0, std::memory_order_release);
}

void Job::EndStopLocked(const std::vector<Stall>& holdouts, const std::string& what,
                        Completions* out) {
  std::vector<std::string> names;
  for (const Stall& h : holdouts) {
    names.push_back(DescribeStall(h, membership_.Describe(h.rank), "stuck"));
  }
  const std::string text =
      absl::StrCat(what, ": ", names.empty() ? "no rank still works" : absl::StrJoin(names, "; "));
  stalls_ = holdouts;
  if (const CommittedCheckpoint* c = checkpoints_.latest()) {
    stop_note_ = absl::StrCat(text, "; resumable from the checkpoint of step ", c->step);
    exit_reason_ = stop_note_;
    lifecycle_.FinishStop();
    StateChangedLocked(stop_note_, out);
  } else {
    exit_reason_ = absl::StrCat(text, "; no checkpoint to resume from");
    FailLocked(CauseOfStall(holdouts.empty() ? -1 : holdouts.front().rank, exit_reason_),
               absl::StatusCode::kDeadlineExceeded, absl::InfinitePast(), out);
  }
  exit_code_ = lifecycle_.ExitCode();
}

}  // namespace ddp
