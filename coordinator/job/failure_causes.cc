#include "coordinator/job/failure_causes.h"

#include "absl/strings/str_cat.h"

namespace ddp {

std::string SecondsText(absl::Duration d) { return absl::StrCat(absl::ToDoubleSeconds(d), "s"); }

FailureCause CauseOfLostWorker(int rank, const std::string& who, const LostWorker& lost) {
  FailureCause c;
  c.rank = rank;
  c.kind = lost.signal > 0 ? FailureKind::kSignal : FailureKind::kExitCode;
  c.text = absl::StrCat(who, " ", lost.what, rank < 0 ? " during registration" : "");
  return c;
}

FailureCause CauseOfSilence(int rank, const std::string& who, absl::Duration silent,
                            absl::Duration timeout) {
  return {rank, FailureKind::kLostHeartbeat,
          absl::StrCat(who, " lost: no heartbeat for ", SecondsText(silent), " (timeout ",
                       absl::FormatDuration(timeout), ")")};
}

FailureKind KindOfWorkerOutcome(const absl::Status& outcome) {
  switch (outcome.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return FailureKind::kCollectiveError;
    default:
      return FailureKind::kWorkerError;
  }
}

FailureCause CauseOfWorkerOutcome(int rank, const std::string& who, const absl::Status& outcome) {
  return {rank, KindOfWorkerOutcome(outcome), absl::StrCat(who, " failed: ", outcome.message())};
}

FailureCause CauseOfStall(int rank, const std::string& text) {
  return {rank, FailureKind::kStall, text};
}

FailureCause CauseOfRegistrationTimeout(absl::Duration timeout, const std::string& missing) {
  return {
      -1, FailureKind::kRegistrationTimeout,
      absl::StrCat("registration timed out after ", absl::FormatDuration(timeout), ": ", missing)};
}

FailureCause CauseOfRecoveryTimeout(absl::Duration timeout, const std::string& missing) {
  return {-1, FailureKind::kRegistrationTimeout,
          absl::StrCat("recovery timed out after ", absl::FormatDuration(timeout), ": ", missing)};
}

FailureCause CauseOfUnexplainedCollectiveFailure(const std::string& who, const std::string& what) {
  return {-1, FailureKind::kCollectiveError,
          absl::StrCat("a collective failed on ", who, " with no rank lost: ", what)};
}

FailureCause CauseOfOperatorStop(const std::string& why) {
  return {-1, FailureKind::kOperatorStop, absl::StrCat("stopped by operator: ", why)};
}

FailureCause RootCause(const FailureCause& root, const FailureCause& earlier) {
  return {root.rank, root.kind, absl::StrCat(root.text, "; then ", earlier.text)};
}

}  // namespace ddp
