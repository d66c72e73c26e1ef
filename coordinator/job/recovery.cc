#include "coordinator/job/recovery.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ddp {

Recovery::Recovery(int max_restarts, absl::Duration timeout, absl::Time start)
    : max_restarts_(std::max(0, max_restarts)), timeout_(timeout), start_(start) {}

void Recovery::Lose(const FailureCause& cause, absl::Time now) {
  lost_.push_back(LostRank{cause, absl::ToDoubleSeconds(now - start_), false});
}

void Recovery::Begin(const FailureCause& cause, absl::Time now) {
  deadline_ = now + timeout_;
  if (in_progress_) return;
  in_progress_ = true;
  cause_ = cause;
  began_ = now;
}

void Recovery::End(absl::Time now, const std::vector<int>& replaced) {
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

}  // namespace ddp
