// What `srun ddp-trainer` (or plain `ddp-trainer`) does before any training: start the job's
// coordinator on task 0, spawn this task's workers with fork+exec, and supervise them until they
// end. Nothing here touches LibTorch, CUDA or gRPC: workers are forked before any such thread
// exists. (The LostReporter, called only after every worker has been forked, may use gRPC.)
//
// Thread safety: single-threaded (the launcher's main thread).
#ifndef SLURM_DDP_TRAINER_APP_LAUNCHER_H_
#define SLURM_DDP_TRAINER_APP_LAUNCHER_H_

#include <functional>
#include <string>

#include "common/coordinator_api.h"
#include "trainer/app/config.h"
#include "trainer/app/launch_plan.h"

namespace ddp {

// Runs the plan: starts the coordinator (task 0), spawns workers (re-executing `argv` with
// --internal-worker), forwards SIGTERM/SIGUSR1/SIGINT to them, stops the rest when one fails.
// Returns the task's exit code (config.h).
//
// A worker killed by a signal cannot tell the coordinator why it vanished; its peers only see a
// broken connection. `report_lost` (optional) tells the coordinator which worker died and how,
// and returns the worker's global rank description for the launcher's log ("" if unknown).
using LostReporter = std::function<std::string(const LostWorker&)>;
int RunLauncher(const LaunchPlan& plan, const TrainerConfig& config, int argc, char** argv,
                const LostReporter& report_lost = nullptr);

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_APP_LAUNCHER_H_
