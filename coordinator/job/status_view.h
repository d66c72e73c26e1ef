// Composes the job's JobStatus from its parts' views: one row per rank (or per registered worker
// while the world is incomplete) and the job-wide figures derived from the rows (the slowest
// rank's step, mean loss, summed throughput, epoch, ETA).
//
// Thread safety: pure functions.
#ifndef SLURM_DDP_COORDINATOR_JOB_STATUS_VIEW_H_
#define SLURM_DDP_COORDINATOR_JOB_STATUS_VIEW_H_

#include <vector>

#include "common/coordinator_api.h"
#include "common/job_status.h"
#include "coordinator/job/liveness.h"

namespace ddp {

// A status row for a rank from its identity and liveness sample.
RankStatus RankRow(int rank, const WorkerIdentity& who, const RankSample& sample);
// A status row for a worker that joined before the world was complete (rank -1, "registered").
RankStatus RegisteredRow(const WorkerIdentity& who);

// Fills the job-wide progress of `status` from `progress` (one report per rank, in rank order):
// step = the slowest rank's, loss = the mean, samples/s = the sum, epoch / epochs /
// steps_per_epoch = the largest reported. With `running` and `seconds_running` > 0, the ETA
// extrapolates the pace so far over the remaining steps. Nothing changes for an empty list.
void SummarizeProgress(const std::vector<ProgressReport>& progress, bool running,
                       double seconds_running, JobStatus* status);

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_STATUS_VIEW_H_
