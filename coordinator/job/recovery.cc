#include "coordinator/job/recovery.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "coordinator/job/failure_causes.h"

namespace ddp {

Recovery::Recovery(int max_restarts, absl::Duration timeout, absl::Time start)
    : max_restarts_(std::max(0, max_restarts)), timeout_(timeout), start_(start) {}

void Recovery::Lose(const FailureCause& cause, absl::Time now) {
  lost_.push_back(LostRank{cause, absl::ToDoubleSeconds(now - start_), false});
}

bool Recovery::TakeRestart() {
  if (unexplained_restart_) {
    unexplained_restart_ = false;
    return true;
  }
  if (!CanRestart()) return false;
  UseRestart();
  return true;
}

void Recovery::Begin(const FailureCause& cause, absl::Time now) {
  early_rejoin_at_ = absl::InfiniteFuture();
  deadline_ = now + timeout_;
  if (in_progress_) return;
  in_progress_ = true;
  cause_ = cause;
  began_ = now;
}

void Recovery::End(absl::Time now, const std::vector<int>& replaced) {
  early_rejoin_at_ = absl::InfiniteFuture();
  unexplained_restart_ = false;
  reported_nodes_.clear();
  if (!in_progress_) return;
  in_progress_ = false;
  deadline_ = absl::InfiniteFuture();
  last_seconds_ = absl::ToDoubleSeconds(now - began_);
  for (int rank : replaced) {
    for (LostRank& l : lost_) {
      if (l.cause.rank == rank) l.replaced = true;
    }
  }
}

double Recovery::Elapsed(absl::Time now) const {
  return in_progress_ ? absl::ToDoubleSeconds(now - began_) : 0.0;
}

FailureCause Recovery::ExhaustedCause(const FailureCause& cause) const {
  if (max_restarts_ == 0) return cause;
  FailureCause out = cause;
  absl::StrAppend(&out.text, "; restarts exhausted (", restarts_, " of ", max_restarts_, " used)");
  std::string before;
  for (const LostRank& l : lost_) {
    if (l.cause.text == cause.text) continue;  // the one this failure is about
    absl::StrAppend(&before, before.empty() ? "" : "; ", l.cause.text,
                    absl::StrFormat(" at +%.1fs", l.at_seconds));
  }
  if (!before.empty()) absl::StrAppend(&out.text, "; lost before: ", before);
  return out;
}

std::string Recovery::LossOf(int rank) const {
  std::string text = "lost";
  for (const LostRank& l : lost_) {
    if (l.cause.rank == rank) text = l.cause.text;  // the latest loss of that rank
  }
  return text;
}

void Recovery::RejoinedEarly(absl::Time now, const std::string& who, const std::string& what) {
  if (early_rejoin_at_ != absl::InfiniteFuture()) return;
  early_rejoin_at_ = now;
  early_rejoin_who_ = who;
  early_rejoin_what_ = what;
}

std::optional<FailureCause> Recovery::Unexplained(absl::Time now, absl::Duration window) {
  if (early_rejoin_at_ == absl::InfiniteFuture() || now - early_rejoin_at_ < window) {
    return std::nullopt;
  }
  early_rejoin_at_ = absl::InfiniteFuture();
  return CauseOfUnexplainedCollectiveFailure(early_rejoin_who_, early_rejoin_what_);
}

void Recovery::UseRestartForUnexplained() {
  UseRestart();
  unexplained_restart_ = true;
}

bool Recovery::NodeAlive(int node, absl::Time now) const {
  return reported_nodes_.count(node) > 0 || node_tasks_.Alive(node, now);
}

}  // namespace ddp
