#include "trainer/launcher/failure_policy.h"

#include "common/exit_codes.h"

namespace ddp {

void FailurePolicy::RecordFailure(int code) {
  if (result_ == kExitOk || result_ == kExitResumable) {
    result_ = code == kExitAborted || code == kExitUsage ? code : kExitFailed;
  }
}

FailurePolicy::Decision FailurePolicy::OnWorkerExit(const ExitStatus& status, bool respawned) {
  Decision d;
  const int code = status.code();
  if (code == kExitOk || leaving_) return d;
  if (code == kExitResumable) {
    if (result_ == kExitOk) result_ = kExitResumable;
    return d;
  }
  d.failure = true;
  d.first = !stopping_;
  // Only a death nobody asked for: not a worker being stopped, nor one after a forwarded signal
  // that ends workers (OnSignalForwarded).
  const bool asked = forwarded_ || (checkpoint_asked_ && !status.signaled());
  d.report_lost = d.first && !asked && status.signaled();
  // kExitAborted: the coordinator failed the job; kExitUsage: a new start fails the same way.
  const bool respawnable = status.signaled() || (code != kExitAborted && code != kExitUsage);
  if (d.first && !asked && recovery_ && (respawnable || (respawned && code == kExitUsage))) {
    // In-job recovery: the coordinator decides (RESPAWN, STOP or WAIT).
    d.report_lost = true;
    d.ask = true;
    if (restarts_left_ > 0 && respawnable) {
      --restarts_left_;
      d.action = Action::kRespawn;
    } else {
      d.action = Action::kStopOthers;
    }
    return d;
  }
  if (d.first) {
    stopping_ = true;
    d.action = Action::kStopOthers;
  }
  RecordFailure(code);
  return d;
}

void FailurePolicy::OnRespawnDeclined(const ExitStatus& status, bool stop_others, bool job_failed) {
  if (stop_others) stopping_ = true;
  // A worker that ended with its own error code (not a signal) failed by itself: the job's
  // failure is its own, and the task keeps its code (a failed stop checkpoint stays exit 1).
  RecordFailure(job_failed && status.signaled() ? kExitAborted : status.code());
}

void FailurePolicy::OnLaunchFailure() {
  stopping_ = true;
  RecordFailure(kExitFailed);
}

}  // namespace ddp
