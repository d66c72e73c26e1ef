// Where the coordinator decides a failure's typed cause (common/failure_cause.h), once, from what
// it observed: a launcher's report of a dead worker (signal or exit code), a heartbeat timeout, a
// worker's own error report (its status code: collective or worker error), the registration
// deadline, or an operator's stop. Nothing downstream parses the text. To add a cause, add its
// FailureKind and the function that builds it here.
//
// Thread safety: pure functions.
#ifndef SLURM_DDP_COORDINATOR_JOB_FAILURE_CAUSES_H_
#define SLURM_DDP_COORDINATOR_JOB_FAILURE_CAUSES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/coordinator_api.h"
#include "common/failure_cause.h"

namespace ddp {

// "1.5s"
std::string SecondsText(absl::Duration d);

// A worker died without reporting; `who` describes it ("rank 3 (host h, ...)" or, before ranks
// exist, "worker (host h, ...)"); rank -1 before ranks exist. kSignal when lost.signal > 0,
// else kExitCode. Text: "<who> <lost.what>" (+ " during registration" when rank < 0).
FailureCause CauseOfLostWorker(int rank, const std::string& who, const LostWorker& lost);

// No heartbeat from `rank` for `silent` (> `timeout`): kLostHeartbeat.
FailureCause CauseOfSilence(int rank, const std::string& who, absl::Duration silent,
                            absl::Duration timeout);

// What a worker's failed outcome (ReportDone) means: UNAVAILABLE and DEADLINE_EXCEEDED are a
// failed collective (a peer gone, a timeout); every other code is the worker's own error.
FailureKind KindOfWorkerOutcome(const absl::Status& outcome);
// A worker reported `outcome` (not OK, not CANCELLED): "<who> failed: <message>".
FailureCause CauseOfWorkerOutcome(int rank, const std::string& who, const absl::Status& outcome);

// A rank stalled (stall_rule.h), or held up a graceful stop past its timeout: kStall.
// `text` names the rank, its phase and its peers (DescribeStall).
FailureCause CauseOfStall(int rank, const std::string& text);

// The registration deadline passed; `missing` names who never came.
FailureCause CauseOfRegistrationTimeout(absl::Duration timeout, const std::string& missing);

// A recovery did not complete within `timeout`; `missing` names the slots nobody took (and how
// their replacement last ended) and the members that did not rejoin.
FailureCause CauseOfRecoveryTimeout(absl::Duration timeout, const std::string& missing);

// A survivor's collective failed and no lost rank was known within the root-cause window: the
// job recovers with the same members (kCollectiveError, no rank to blame).
FailureCause CauseOfUnexplainedCollectiveFailure(const std::string& who, const std::string& what);

// An operator (or a signal, or the coordinator shutting down) aborted the job.
FailureCause CauseOfOperatorStop(const std::string& why);

// `root` (a death) caused `earlier` (a peer's report of the broken collective): the cause names
// the dead rank and keeps the earlier report: "<root text>; then <earlier text>".
FailureCause RootCause(const FailureCause& root, const FailureCause& earlier);

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_FAILURE_CAUSES_H_
