// One training process (one GPU, or one CPU worker): opens its data and model, finds the
// coordinator through the dist_file, registers for its rank, builds the process group through the
// coordinator's store, resumes from the newest valid checkpoint, trains, and reports the outcome.
// Log lines carry a "[rank N]" prefix; rank 0 prints progress, the others errors only.
//
// Thread safety: runs on the worker process's main thread.
#ifndef SLURM_DDP_TRAINER_APP_WORKER_H_
#define SLURM_DDP_TRAINER_APP_WORKER_H_

#include "trainer/app/config.h"
#include "trainer/app/launch_plan.h"

namespace ddp {

// Returns the process exit code (config.h).
int RunWorker(const TrainerConfig& config, const WorkerPlacement& placement);

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_APP_WORKER_H_
