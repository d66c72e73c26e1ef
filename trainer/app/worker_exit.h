// How a worker ends: the outcome of its training turned into its exit code (common/exit_codes.h)
// and reported to the coordinator. A failure caused by another rank's (a collective that failed
// because a peer died) waits for the coordinator to name that rank, and exits "aborted" naming
// it; a checkpoint that met a full disk exits resumable; a lost coordinator exits resumable when
// the stop checkpoint was written.
//
// Thread safety: runs on the worker process's main thread.
#ifndef SLURM_DDP_TRAINER_APP_WORKER_EXIT_H_
#define SLURM_DDP_TRAINER_APP_WORKER_EXIT_H_

#include <string>

#include "absl/status/statusor.h"
#include "trainer/app/training_loop.h"
#include "trainer/checkpoint/checkpoint_store.h"
#include "trainer/launcher/config.h"
#include "trainer/launcher/launch_plan.h"
#include "trainer/worker/coordinator_session.h"

namespace ddp {

// How a training run ended: in its setup (start point, process group, state sync) or in the loop.
struct TrainOutcome {
  bool in_setup = false;
  absl::StatusOr<LoopResult> result;
};

// Prints "<prefix>error: <the message's first line>" and returns `code`.
int Fail(const std::string& prefix, int code, const std::string& message);

// Reports how training ended and turns it into the exit code (common/exit_codes.h); rank 0
// writes final.pt first (CheckpointStore::Finish). A worker whose training failed after its job
// had SUCCEEDED or STOPPED without it (the job's result file, common/job_result.h, says so: every
// rank of the job reported its end, and this worker had not) was replaced while it could not run
// (its node stopped, suspended or cut off): it says so and exits as the job did.
int Finish(const TrainerConfig& config, const WorkerPlacement& placement,
           CoordinatorSession& session, CheckpointStore& checkpoints, const TrainOutcome& outcome);

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_APP_WORKER_EXIT_H_
