#include "trainer/launcher/failure_policy.h"

#include "common/exit_codes.h"

namespace ddp {

void FailurePolicy::RecordFailure(int code) {
  if (result_ == kExitOk || result_ == kExitResumable) {
    result_ = code == kExitAborted || code == kExitUsage ? code : kExitFailed;
  }
}

FailurePolicy::Decision FailurePolicy::OnWorkerExit(const ExitStatus& status) {
  Decision d;
  const int code = status.code();
  if (code == kExitOk) return d;
  if (code == kExitResumable) {
    if (result_ == kExitOk) result_ = kExitResumable;
    return d;
  }
  d.failure = true;
  d.first = !stopping_;
  // Only a death nobody asked for: not a worker being stopped, nor one after a forwarded signal.
  d.report_lost = d.first && !forwarded_ && status.signaled();
  if (d.first && !forwarded_ && respawns_left_ > 0) {
    --respawns_left_;
    d.action = Action::kRespawn;
    return d;
  }
  if (d.first) {
    stopping_ = true;
    d.action = Action::kStopOthers;
  }
  RecordFailure(code);
  return d;
}

void FailurePolicy::OnLaunchFailure() {
  stopping_ = true;
  RecordFailure(kExitFailed);
}

}  // namespace ddp
