#include "common/failure_cause.h"

namespace ddp {

const char* FailureKindName(FailureKind kind) {
  switch (kind) {
    case FailureKind::kNone:
      return "none";
    case FailureKind::kSignal:
      return "signal";
    case FailureKind::kExitCode:
      return "exit_code";
    case FailureKind::kLostHeartbeat:
      return "lost_heartbeat";
    case FailureKind::kStall:
      return "stall";
    case FailureKind::kCollectiveError:
      return "collective_error";
    case FailureKind::kWorkerError:
      return "worker_error";
    case FailureKind::kRegistrationTimeout:
      return "registration_timeout";
    case FailureKind::kCoordinatorLost:
      return "coordinator_lost";
    case FailureKind::kOperatorStop:
      return "operator_stop";
    case FailureKind::kStragglerReplaced:
      return "straggler_replaced";
  }
  return "unknown";
}

}  // namespace ddp
