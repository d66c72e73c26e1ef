// A task's place in the job, worked out from the Slurm step (or local mode) before anything
// starts, and the placement each worker receives from its launcher.
//
// Launch modes:
//   local                   no SLURM_JOB_ID: --nprocs-per-node workers on this machine
//   slurm, task per node    every node runs one task: it spawns --nprocs-per-node workers
//                           (default: the GPUs visible to the task, or 1 without GPUs)
//   slurm, task per worker  some node runs several tasks (--ntasks-per-node=G, uneven layouts):
//                           every task is exactly one worker
// Global ranks are assigned by the coordinator ordered by (node, local rank), so with G workers
// on every node rank = node * G + local rank, as in the original recipe.
//
// Thread safety: pure functions over injected values.
#ifndef SLURM_DDP_TRAINER_APP_LAUNCH_PLAN_H_
#define SLURM_DDP_TRAINER_APP_LAUNCH_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/slurm_env.h"
#include "trainer/app/config.h"

namespace ddp {

// Where one worker stands; handed from the launcher to the worker through DDP_WORKER_* variables.
struct WorkerPlacement {
  std::string job_id;
  int64_t generation = 0;  // Slurm restart count (0 in local mode)
  std::string dist_file;
  std::string coordinator_log;  // the coordinator's log, named in errors
  int world_size = 1;
  int num_nodes = 1;
  int node_rank = 0;
  int local_rank = 0;
  int local_world_size = 1;
  bool local_mode = true;
};

struct LaunchPlan {
  WorkerPlacement base;            // local_rank of the first worker this task runs
  std::vector<int> local_ranks;    // workers this task spawns
  bool start_coordinator = false;  // task 0 only
  std::string mode;                // "local", "slurm task-per-node", "slurm task-per-worker"
};

// Decides the plan from the flags, the environment and the GPUs visible to this task.
// Contradictions (more workers than GPUs for NCCL, missing Slurm variables, a world size that
// does not add up) are one-line errors.
absl::StatusOr<LaunchPlan> PlanLaunch(const TrainerConfig& config, const EnvMap& env,
                                      int visible_gpus, int pid);

// GPUs this process may use without initializing CUDA: CUDA_VISIBLE_DEVICES if set, else the
// /dev/nvidiaN device files.
int CountVisibleGpus(const EnvMap& env);

// Environment entries that describe `p` to a worker, and the reverse.
std::vector<std::string> PlacementEnv(const WorkerPlacement& p);
absl::StatusOr<WorkerPlacement> PlacementFromEnv(const EnvMap& env);

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_APP_LAUNCH_PLAN_H_
