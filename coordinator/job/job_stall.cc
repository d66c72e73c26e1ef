// Job's stall rule and stop deadline (docs/operations.md, "Stall detection"): which ranks are stuck
// while their peers wait, what a stall does (a restart left: the stalled rank is told to exit and
// its launcher replaces it; none: the job fails), a stop signal seen in a heartbeat, and a graceful
// stop that cannot complete. Same class and lock as job.cc.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

std::vector<RankView> Job::RankViewsLocked(absl::Time now, bool observe) {
  std::vector<RankView> views;
  const int n = membership_.num_ranks();
  views.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    views.push_back(stall_watch_.View(r, liveness_.Sample(r, now), now, observe));
  }
  return views;
}

void Job::JudgeStallsLocked(absl::Time now, Completions* out) {
  if (!stall_watch_.Due(now)) return;
  for (const Stall& st : stall_watch_.Judge(RankViewsLocked(now, /*observe=*/true))) {
    EventLocked(DescribeStall(st, membership_.Describe(st.rank), "stalled"), out);
  }
  const std::vector<Stall>& stalls = stall_watch_.stalls();
  if (stalls.empty()) return;
  if (lifecycle_.state() == JobState::kStopping) {
    EndStopLocked(stalls, "graceful stop cannot complete", out);
    return;
  }
  std::vector<std::string> described;
  for (const Stall& st : stalls) {
    described.push_back(DescribeStall(st, membership_.Describe(st.rank), "stalled"));
  }
  if (recovery_.CanRestart() && lifecycle_.ranks_done() == 0) {
    // In-job recovery: a restart is left, so only the stalled ranks are told to exit (their
    // heartbeat replies carry kExit; the heartbeat thread ends the process even though the
    // training thread is stuck). Each launcher reports its worker's end (ReportLost), which costs
    // the restart and replaces the rank, as for any lost rank. A rank whose heartbeat thread is
    // stuck too goes silent and is lost at the heartbeat timeout.
    for (size_t i = 0; i < stalls.size(); ++i) OrderExitLocked(stalls[i].rank, described[i], out);
    return;
  }
  // Without restarts the stall fails the job, naming the rank and its phase: every rank gets
  // kAbort, and a rank that cannot act on it is ended by its heartbeat thread (ProgressReporter's
  // abort_grace).
  FailLocked(CauseOfStall(stalls.front().rank, absl::StrJoin(described, "; ")),
             absl::StatusCode::kDeadlineExceeded, absl::InfinitePast(), out);
}

void Job::OrderExitLocked(int rank, const std::string& why, Completions* out) {
  if (!published_.exit_orders().Order(rank, membership_.who(rank).pid,
                                      absl::StrCat(why, "; told to exit to be replaced"))) {
    return;  // told already
  }
  EventLocked(absl::StrCat(membership_.Describe(rank),
                           " told to exit (stalled); its launcher replaces it, restart ",
                           recovery_.restarts() + 1, " of ", recovery_.max_restarts()),
              out);
}

void Job::EndStopLocked(const std::vector<Stall>& holdouts, const std::string& what,
                        Completions* out) {
  std::vector<std::string> names;
  for (const Stall& h : holdouts) {
    names.push_back(DescribeStall(h, membership_.Describe(h.rank), "stuck"));
  }
  const std::string text =
      absl::StrCat(what, ": ", names.empty() ? "no rank still works" : absl::StrJoin(names, "; "));
  stall_watch_.Hold(holdouts);
  if (const CommittedCheckpoint* c = checkpoints_.latest()) {
    lifecycle_.EndStopResumable(
        absl::StrCat(text, "; resumable from the checkpoint of step ", c->step));
    StateChangedLocked(lifecycle_.stop_note(), out);
  } else {
    lifecycle_.OrderExit(absl::StrCat(text, "; no checkpoint to resume from"));
    FailLocked(
        CauseOfStall(holdouts.empty() ? -1 : holdouts.front().rank, lifecycle_.exit_reason()),
        absl::StatusCode::kDeadlineExceeded, absl::InfinitePast(), out);
  }
}

}  // namespace ddp
