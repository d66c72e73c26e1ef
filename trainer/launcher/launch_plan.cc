#include "trainer/launcher/launch_plan.h"

#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/dist_file.h"
#include "common/status_macros.h"

namespace ddp {
namespace {

std::string Get(const EnvMap& env, const std::string& key) {
  auto it = env.find(key);
  return it == env.end() ? "" : it->second;
}

absl::StatusOr<int64_t> GetInt(const EnvMap& env, const std::string& key) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(Get(env, key), &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, "='", Get(env, key), "' is not an integer (worker environment)"));
  }
  return v;
}

// Workers per node for task-per-node mode, checked against the GPUs the task can see.
absl::StatusOr<int> WorkersPerNode(const TrainerConfig& config, int visible_gpus) {
  const bool wants_gpu = config.backend == "nccl" || (config.backend == "auto" && visible_gpus > 0);
  if (config.backend == "nccl" && visible_gpus == 0) {
    return absl::FailedPreconditionError("--backend nccl but no GPU is visible to this task");
  }
  int n = config.nprocs_per_node;
  if (n == 0) n = std::max(1, visible_gpus);
  if (wants_gpu && n > visible_gpus) {
    return absl::FailedPreconditionError(
        absl::StrCat("--nprocs-per-node ", n, " but only ", visible_gpus,
                     " GPU(s) are visible to this task (use --backend gloo to run on CPU)"));
  }
  return n;
}

}  // namespace

int CountVisibleGpus(const EnvMap& env) {
  auto it = env.find("CUDA_VISIBLE_DEVICES");
  if (it != env.end()) return CountVisibleDevices(it->second);
  int count = 0;
  if (DIR* dir = opendir("/dev")) {
    while (dirent* e = readdir(dir)) {
      const std::string name = e->d_name;
      if (name.size() > 6 && name.compare(0, 6, "nvidia") == 0 &&
          std::all_of(name.begin() + 6, name.end(), [](char ch) { return std::isdigit(ch); })) {
        ++count;
      }
    }
    closedir(dir);
  }
  return count;
}

absl::StatusOr<LaunchPlan> PlanLaunch(const TrainerConfig& config, const EnvMap& env,
                                      int visible_gpus, int pid) {
  LaunchPlan plan;
  WorkerPlacement& p = plan.base;
  if (!IsSlurm(env)) {
    ASSIGN_OR_RETURN(const int n, WorkersPerNode(config, visible_gpus));
    if (config.spare_nodes > 0) {
      return absl::FailedPreconditionError(
          "--spare-nodes needs a Slurm step with one task per node (local mode has one node)");
    }
    plan.mode = "local";
    p.local_mode = true;
    p.job_id = config.job_id.empty() ? absl::StrCat("local-", pid) : config.job_id;
    p.world_size = n;
    p.local_world_size = n;
    for (int i = 0; i < n; ++i) plan.local_ranks.push_back(i);
    plan.start_coordinator = true;
  } else {
    ASSIGN_OR_RETURN(const SlurmEnv slurm, ParseSlurmEnv(env));
    p.local_mode = false;
    p.job_id = SlurmJobIdentity(slurm);  // the step's: steps never share a job
    p.generation = slurm.restart_count;
    p.num_nodes = slurm.num_nodes;
    p.node_rank = slurm.node_id;
    plan.start_coordinator = slurm.proc_id == 0;
    const int max_tasks =
        slurm.tasks_per_node.empty()
            ? slurm.tasks_on_this_node
            : *std::max_element(slurm.tasks_per_node.begin(), slurm.tasks_per_node.end());
    if (max_tasks > 1) {
      // One task per worker: the step's layout is the job's layout.
      if (config.nprocs_per_node > 1) {
        return absl::FailedPreconditionError(absl::StrCat(
            "--nprocs-per-node ", config.nprocs_per_node, " with ", slurm.tasks_on_this_node,
            " Slurm tasks on this node: use one task per node, or one task per worker, not both"));
      }
      if ((config.backend == "nccl" || (config.backend == "auto" && visible_gpus > 0)) &&
          visible_gpus > 0 && slurm.local_id >= visible_gpus && visible_gpus != 1) {
        return absl::FailedPreconditionError(absl::StrCat("task with SLURM_LOCALID ",
                                                          slurm.local_id, " but only ",
                                                          visible_gpus, " GPU(s) visible"));
      }
      if (config.spare_nodes > 0) {
        return absl::FailedPreconditionError(
            "--spare-nodes needs one Slurm task per node (this step runs one task per worker)");
      }
      plan.mode = "slurm task-per-worker";
      p.world_size = slurm.num_tasks;
      p.local_world_size = slurm.tasks_on_this_node;
      plan.local_ranks.push_back(slurm.local_id);
    } else {
      ASSIGN_OR_RETURN(const int n, WorkersPerNode(config, visible_gpus));
      plan.mode = "slurm task-per-node";
      if (config.spare_nodes >= slurm.num_nodes) {
        return absl::FailedPreconditionError(
            absl::StrCat("--spare-nodes ", config.spare_nodes, " leaves no node to train on: the ",
                         "step has ", slurm.num_nodes, " node(s)"));
      }
      p.num_nodes = slurm.num_nodes - config.spare_nodes;
      plan.spare = slurm.node_id >= p.num_nodes;
      if (plan.spare) plan.mode = "slurm task-per-node, spare node";
      p.world_size = n * p.num_nodes;
      p.local_world_size = n;
      for (int i = 0; i < n; ++i) plan.local_ranks.push_back(i);
    }
  }
  if (config.min_nodes > p.num_nodes) {
    return absl::FailedPreconditionError(
        absl::StrCat("--min-nodes ", config.min_nodes, " is more than the job's ", p.num_nodes,
                     " node(s): it could never go on without one"));
  }
  p.dist_file = config.dist_file.empty() ? DefaultDistFilePath(p.job_id) : config.dist_file;
  p.coordinator_log = p.dist_file + ".coordinator.log";
  return plan;
}

std::vector<std::string> CoordinatorCommand(const LaunchPlan& plan, const TrainerConfig& config,
                                            const SupervisionTimeouts& timeouts,
                                            const std::string& coordinator_path) {
  const WorkerPlacement& base = plan.base;
  std::vector<std::string> argv = {
      coordinator_path,
      "--world-size",
      absl::StrCat(base.world_size),
      "--dist-file",
      base.dist_file,
      "--job-id",
      base.job_id,
      "--generation",
      absl::StrCat(base.generation),
      "--registration-timeout",
      absl::StrCat(config.registration_timeout_s),
      "--heartbeat-timeout",
      absl::StrCat(config.heartbeat_timeout_s),
      "--max-restarts",
      absl::StrCat(config.max_restarts),
      "--min-nodes",
      absl::StrCat(config.min_nodes),
      "--stall-timeout",
      absl::StrCat(config.stall_timeout_s),
      "--stop-timeout",
      absl::StrCat(config.stop_timeout_s),
      "--straggler-threshold",
      absl::StrCat(config.straggler_threshold),
      "--straggler-window",
      absl::StrCat(config.straggler_window_s),
      "--straggler-action",
      config.straggler_action,
      "--standby",
      config.standby,
      "--linger",
      absl::StrCat(absl::ToDoubleSeconds(timeouts.coordinator_linger)),
      "--log-file",
      base.coordinator_log,
  };
  if (base.local_mode) {
    // Local jobs never leave this machine.
    argv.push_back("--listen");
    argv.push_back("127.0.0.1:0");
  }
  return argv;
}

std::vector<std::string> WorkerCommand(const std::string& self,
                                       const std::vector<std::string>& args) {
  std::vector<std::string> argv = {self};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--internal-worker");
  return argv;
}

std::vector<std::string> PlacementEnv(const WorkerPlacement& p) {
  std::vector<std::string> env = {
      absl::StrCat("DDP_WORKER_JOB_ID=", p.job_id),
      absl::StrCat("DDP_WORKER_GENERATION=", p.generation),
      absl::StrCat("DDP_WORKER_DIST_FILE=", p.dist_file),
      absl::StrCat("DDP_WORKER_COORDINATOR_LOG=", p.coordinator_log),
      absl::StrCat("DDP_WORKER_WORLD_SIZE=", p.world_size),
      absl::StrCat("DDP_WORKER_NUM_NODES=", p.num_nodes),
      absl::StrCat("DDP_WORKER_NODE_RANK=", p.node_rank),
      absl::StrCat("DDP_WORKER_LOCAL_RANK=", p.local_rank),
      absl::StrCat("DDP_WORKER_LOCAL_WORLD_SIZE=", p.local_world_size),
      absl::StrCat("DDP_WORKER_LOCAL_MODE=", p.local_mode ? 1 : 0),
  };
  if (p.heartbeat_fd >= 0) env.push_back(absl::StrCat("DDP_WORKER_HEARTBEAT_FD=", p.heartbeat_fd));
  if (p.warm_fd >= 0) env.push_back(absl::StrCat("DDP_WORKER_WARM_FD=", p.warm_fd));
  return env;
}

absl::StatusOr<WorkerPlacement> PlacementFromEnv(const EnvMap& env) {
  WorkerPlacement p;
  p.job_id = Get(env, "DDP_WORKER_JOB_ID");
  p.dist_file = Get(env, "DDP_WORKER_DIST_FILE");
  p.coordinator_log = Get(env, "DDP_WORKER_COORDINATOR_LOG");
  if (p.job_id.empty() || p.dist_file.empty()) {
    return absl::FailedPreconditionError(
        "--internal-worker is set by ddp-trainer's launcher only (DDP_WORKER_* missing)");
  }
  ASSIGN_OR_RETURN(p.generation, GetInt(env, "DDP_WORKER_GENERATION"));
  ASSIGN_OR_RETURN(const int64_t world, GetInt(env, "DDP_WORKER_WORLD_SIZE"));
  ASSIGN_OR_RETURN(const int64_t nodes, GetInt(env, "DDP_WORKER_NUM_NODES"));
  ASSIGN_OR_RETURN(const int64_t node, GetInt(env, "DDP_WORKER_NODE_RANK"));
  ASSIGN_OR_RETURN(const int64_t local, GetInt(env, "DDP_WORKER_LOCAL_RANK"));
  ASSIGN_OR_RETURN(const int64_t local_world, GetInt(env, "DDP_WORKER_LOCAL_WORLD_SIZE"));
  ASSIGN_OR_RETURN(const int64_t local_mode, GetInt(env, "DDP_WORKER_LOCAL_MODE"));
  p.world_size = static_cast<int>(world);
  p.num_nodes = static_cast<int>(nodes);
  p.node_rank = static_cast<int>(node);
  p.local_rank = static_cast<int>(local);
  p.local_world_size = static_cast<int>(local_world);
  p.local_mode = local_mode != 0;
  if (!Get(env, "DDP_WORKER_HEARTBEAT_FD").empty()) {
    ASSIGN_OR_RETURN(const int64_t fd, GetInt(env, "DDP_WORKER_HEARTBEAT_FD"));
    p.heartbeat_fd = static_cast<int>(fd);
  }
  if (!Get(env, "DDP_WORKER_WARM_FD").empty()) {
    ASSIGN_OR_RETURN(const int64_t fd, GetInt(env, "DDP_WORKER_WARM_FD"));
    p.warm_fd = static_cast<int>(fd);
  } else if (p.local_rank < 0) {
    return absl::FailedPreconditionError(
        "DDP_WORKER_LOCAL_RANK is negative and no DDP_WORKER_WARM_FD");
  }
  return p;
}

}  // namespace ddp
