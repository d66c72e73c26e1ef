// One training process (one GPU, or one CPU worker), built as nested stages (trainer/worker/,
// docs/development.md, "The worker's stages"): its data, its model and optimizer, its coordinator
// session (the dist_file, registration, heartbeats), then — inside the one exception boundary — its
// communication stage (process group through the coordinator's store + DDP engine, the state
// synced from the rank with the highest step: rank 0 after it loaded the newest valid
// checkpoint), the training loop, and the outcome reported to the coordinator.
// Log lines carry a "[rank N]" prefix; rank 0 prints progress, the others errors only.
//
// Thread safety: runs on the worker process's main thread.
#ifndef SLURM_DDP_TRAINER_APP_WORKER_H_
#define SLURM_DDP_TRAINER_APP_WORKER_H_

#include "trainer/launcher/config.h"
#include "trainer/launcher/launch_plan.h"
#include "trainer/worker/test_hold.h"

namespace ddp {

// Returns the process exit code (config.h). `hold` freezes the worker at a chosen point for
// end-to-end tests (trainer/worker/test_hold.h; the default never holds).
int RunWorker(const TrainerConfig& config, const WorkerPlacement& placement,
              const TestHold& hold = TestHold());

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_APP_WORKER_H_
