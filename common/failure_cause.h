// Why a rank (or the job) failed, as a typed value: the failed rank, a cause and a human text.
// The coordinator decides it once (coordinator/job/failure_causes.h) and carries it in heartbeat
// replies and in status; workers, ddpctl and the dashboard act on `kind` and `rank`, never on the
// text. To add a cause: a value here, its name in failure_cause.cc, the proto enum
// (proto/coordinator.proto FailureKind) and its mapping in proto/convert.cc.
//
// Thread safety: plain values and pure functions.
#ifndef SLURM_DDP_COMMON_FAILURE_CAUSE_H_
#define SLURM_DDP_COMMON_FAILURE_CAUSE_H_

#include <string>

namespace ddp {

enum class FailureKind {
  kNone = 0,
  kSignal,               // the worker process was killed by a signal
  kExitCode,             // the worker process exited non-zero without reporting
  kLostHeartbeat,        // no heartbeat within the heartbeat timeout
  kStall,                // alive but stuck in one phase while its peers wait
  kCollectiveError,      // a collective failed on this rank (peer gone, timeout)
  kWorkerError,          // the worker reported an error (bad data, checkpoint I/O, ...)
  kRegistrationTimeout,  // ranks that never registered before the deadline
  kCoordinatorLost,      // the coordinator could not be reached within its grace period
  kOperatorStop,         // an operator (ddpctl stop --now, a signal) ended the job
  kStragglerReplaced,    // a straggler's node handed to a spare (--straggler-action replace)
};

inline constexpr FailureKind kAllFailureKinds[] = {
    FailureKind::kNone,
    FailureKind::kSignal,
    FailureKind::kExitCode,
    FailureKind::kLostHeartbeat,
    FailureKind::kStall,
    FailureKind::kCollectiveError,
    FailureKind::kWorkerError,
    FailureKind::kRegistrationTimeout,
    FailureKind::kCoordinatorLost,
    FailureKind::kOperatorStop,
    FailureKind::kStragglerReplaced,
};

// The stable lowercase name used in the status JSON ("signal", "lost_heartbeat", ...; "none").
const char* FailureKindName(FailureKind kind);

struct FailureCause {
  int rank = -1;  // the failed rank; -1 when no single rank is to blame
  FailureKind kind = FailureKind::kNone;
  // One line for people, e.g. "rank 3 (host n1, node 1, local rank 1, pid 7) killed by signal 9".
  std::string text;

  bool empty() const { return kind == FailureKind::kNone; }
};

}  // namespace ddp

#endif  // SLURM_DDP_COMMON_FAILURE_CAUSE_H_
