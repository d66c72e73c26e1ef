// The one reader of SLURM_* (and CUDA_VISIBLE_DEVICES) variables. The environment is injected as a
// map so tests drive it deterministically; `ProcessEnvironment()` snapshots the real one.
//
// Thread safety: ParseSlurmEnv and the returned SlurmEnv are plain values; safe from any thread.
#ifndef SLURM_DDP_COMMON_SLURM_ENV_H_
#define SLURM_DDP_COMMON_SLURM_ENV_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ddp {

using EnvMap = std::map<std::string, std::string>;

// A snapshot of this process's environment (the only place that reads `environ`).
EnvMap ProcessEnvironment();

// What one Slurm task knows about its place in the job step.
struct SlurmEnv {
  std::string job_id;               // SLURM_JOB_ID (or SLURM_JOBID)
  int num_tasks = 1;                // SLURM_STEP_NUM_TASKS / SLURM_NTASKS / SLURM_NPROCS
  int proc_id = 0;                  // SLURM_PROCID: global task index
  int local_id = 0;                 // SLURM_LOCALID: task index on this node
  int node_id = 0;                  // SLURM_NODEID: index of this node in the step
  int num_nodes = 1;                // SLURM_STEP_NUM_NODES / SLURM_JOB_NUM_NODES / SLURM_NNODES
  int tasks_on_this_node = 1;       // from SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE
  std::vector<int> tasks_per_node;  // expanded "2(x3),1" -> {2,2,2,1}
  int64_t restart_count = 0;        // SLURM_RESTART_COUNT (0 when absent)
  int step_gpus = 0;                // devices listed in CUDA_VISIBLE_DEVICES (0 when absent/empty)
  std::string node_name;            // SLURMD_NODENAME (may be empty)
  // SLURM_STEP_ID (or SLURM_STEPID): the job step; -1 when absent or one of Slurm's special
  // steps (batch, extern, interactive: 0xFFFFFFF0 and above), which are the job's own.
  int64_t step_id = -1;
};

// The identity of the job a step trains (its dist_file's job id and default path): the Slurm job
// id for the step that runs first (step 0, or no step), "<job id>.<step id>" for the others, so
// that two steps of one allocation never share a dist_file or a coordinator.
std::string SlurmJobIdentity(const SlurmEnv& slurm);

// True when the environment belongs to a Slurm job (SLURM_JOB_ID or SLURM_JOBID is set).
bool IsSlurm(const EnvMap& env);

// Parses and cross-checks the variables. Errors are one line and name the variable at fault.
absl::StatusOr<SlurmEnv> ParseSlurmEnv(const EnvMap& env);

// Expands Slurm's compressed per-node list: "2(x3),1" -> {2,2,2,1}.
absl::StatusOr<std::vector<int>> ParseTasksPerNode(const std::string& text);

// Counts devices in a CUDA_VISIBLE_DEVICES value ("0,1,3" -> 3, "" -> 0, "NoDevFiles" -> 0).
int CountVisibleDevices(const std::string& text);

}  // namespace ddp

#endif  // SLURM_DDP_COMMON_SLURM_ENV_H_
