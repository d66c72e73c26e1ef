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
#ifndef SLURM_DDP_TRAINER_LAUNCHER_LAUNCH_PLAN_H_
#define SLURM_DDP_TRAINER_LAUNCHER_LAUNCH_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/slurm_env.h"
#include "trainer/launcher/config.h"

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
  // The worker's end of its task's heartbeat relay socket (client/heartbeat_relay.h), inherited
  // across exec; -1: the worker heartbeats the coordinator itself.
  int heartbeat_fd = -1;
  // A warm worker's end of its warm link (trainer/launcher/warm_link.h), inherited across exec;
  // -1 for a worker started for its slot. A warm worker's local_rank is -1 until activated;
  // then it holds the link until its first committed step.
  int warm_fd = -1;
};

struct LaunchPlan {
  WorkerPlacement base;            // local_rank of the first worker this task runs
  std::vector<int> local_ranks;    // workers this task spawns
  bool start_coordinator = false;  // task 0 only
  // A spare node (--spare-nodes): it starts no worker until the coordinator gives it a lost
  // node; then base.node_rank becomes that node's. base.node_rank is its own node id till then.
  bool spare = false;
  std::string mode;  // "local", "slurm task-per-node", "slurm task-per-worker"
};

// How long the launcher waits at each point where it stops or outlasts a child. Every value is
// the launcher's own; the coordinator is told the one it must honour (--linger) on its command
// line, so nothing here depends on another binary's defaults.
struct SupervisionTimeouts {
  // A worker failed: its peers get SIGTERM, then SIGKILL after this long.
  absl::Duration worker_stop_grace = absl::Seconds(10);
  // The coordinator keeps serving status this long after the job ends (its --linger) ...
  absl::Duration coordinator_linger = absl::Seconds(10);
  // ... and gets this long beyond it to shut down by itself, after a successful job.
  absl::Duration coordinator_exit_margin = absl::Seconds(5);
  // After a failed or stopped job the linger is cut short: SIGTERM after this long.
  absl::Duration coordinator_failed_wait = absl::Seconds(3);
  // The coordinator was asked to stop (SIGTERM): SIGKILL after this long.
  absl::Duration coordinator_stop_grace = absl::Seconds(5);
  // A stop signal was forwarded to the workers: those still running this long after it are
  // stopped (SIGTERM, then SIGKILL after worker_stop_grace). The coordinator ends a stuck stop at
  // its --stop-timeout; this backstop (--stop-timeout + 30 s) holds when the coordinator cannot.
  absl::Duration signal_stop_deadline = absl::Seconds(90);
};

// Decides the plan from the flags, the environment and the GPUs visible to this task.
// Contradictions (more workers than GPUs for NCCL, missing Slurm variables, a world size that
// does not add up) are one-line errors.
absl::StatusOr<LaunchPlan> PlanLaunch(const TrainerConfig& config, const EnvMap& env,
                                      int visible_gpus, int pid);

// GPUs this process may use without initializing CUDA: CUDA_VISIBLE_DEVICES if set, else the
// /dev/nvidiaN device files.
int CountVisibleGpus(const EnvMap& env);

// The command line of the job's coordinator (task 0): `coordinator_path` with the job's
// identity, the flags' timeouts and `timeouts.coordinator_linger` spelled out.
std::vector<std::string> CoordinatorCommand(const LaunchPlan& plan, const TrainerConfig& config,
                                            const SupervisionTimeouts& timeouts,
                                            const std::string& coordinator_path);
// The command line of a worker: this program (`self`) again with the task's own arguments
// (`args`, argv[1..]) and --internal-worker.
std::vector<std::string> WorkerCommand(const std::string& self,
                                       const std::vector<std::string>& args);

// Environment entries that describe `p` to a worker, and the reverse.
std::vector<std::string> PlacementEnv(const WorkerPlacement& p);
absl::StatusOr<WorkerPlacement> PlacementFromEnv(const EnvMap& env);

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_LAUNCHER_LAUNCH_PLAN_H_
