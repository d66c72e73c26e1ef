#include "common/slurm_env.h"

#include <unistd.h>

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

extern char** environ;

namespace ddp {
namespace {

const std::string* Find(const EnvMap& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

// Returns the first variable of `names` that is set, with its name.
const std::string* FindFirst(const EnvMap& env, std::initializer_list<const char*> names,
                             const char** found) {
  for (const char* name : names) {
    if (const std::string* v = Find(env, name)) {
      *found = name;
      return v;
    }
  }
  return nullptr;
}

absl::StatusOr<int> ParseInt(const char* name, const std::string& value, int min) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(value, &v) || v < min || v > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "='", value, "' is not an integer >= ", min));
  }
  return static_cast<int>(v);
}

// Reads an optional integer variable (first of `names` that is set) into `out`.
absl::Status ReadInt(const EnvMap& env, std::initializer_list<const char*> names, int min,
                     bool required, int* out) {
  const char* name = nullptr;
  const std::string* v = FindFirst(env, names, &name);
  if (v == nullptr) {
    if (required) {
      return absl::InvalidArgumentError(
          absl::StrCat("Slurm job without ", *names.begin(), " in the environment"));
    }
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(*out, ParseInt(name, *v, min));
  return absl::OkStatus();
}

}  // namespace

std::string SlurmJobIdentity(const SlurmEnv& slurm) {
  return slurm.step_id > 0 ? absl::StrCat(slurm.job_id, ".", slurm.step_id) : slurm.job_id;
}

EnvMap ProcessEnvironment() {
  EnvMap env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

bool IsSlurm(const EnvMap& env) {
  return Find(env, "SLURM_JOB_ID") != nullptr || Find(env, "SLURM_JOBID") != nullptr;
}

absl::StatusOr<std::vector<int>> ParseTasksPerNode(const std::string& text) {
  std::vector<int> out;
  if (text.empty()) return absl::InvalidArgumentError("empty tasks-per-node list");
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    absl::string_view count = part;
    int64_t repeat = 1;
    size_t paren = part.find('(');
    if (paren != absl::string_view::npos) {
      count = part.substr(0, paren);
      absl::string_view rep = part.substr(paren);
      if (!absl::ConsumePrefix(&rep, "(x") || !absl::ConsumeSuffix(&rep, ")") ||
          !absl::SimpleAtoi(rep, &repeat) || repeat < 1 || repeat > 1000000) {
        return absl::InvalidArgumentError(
            absl::StrCat("bad tasks-per-node entry '", part, "' in '", text, "'"));
      }
    }
    int64_t n = 0;
    if (!absl::SimpleAtoi(count, &n) || n < 1 || n > 1000000) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad tasks-per-node entry '", part, "' in '", text, "'"));
    }
    if (out.size() + static_cast<size_t>(repeat) > 1000000) {
      return absl::InvalidArgumentError(absl::StrCat("tasks-per-node list too long: '", text, "'"));
    }
    out.insert(out.end(), static_cast<size_t>(repeat), static_cast<int>(n));
  }
  return out;
}

int CountVisibleDevices(const std::string& text) {
  if (text.empty() || text == "NoDevFiles") return 0;
  int n = 0;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    if (!absl::StripAsciiWhitespace(part).empty()) ++n;
  }
  return n;
}

absl::StatusOr<SlurmEnv> ParseSlurmEnv(const EnvMap& env) {
  SlurmEnv s;
  const char* name = nullptr;
  const std::string* job = FindFirst(env, {"SLURM_JOB_ID", "SLURM_JOBID"}, &name);
  if (job == nullptr)
    return absl::FailedPreconditionError("not a Slurm job: SLURM_JOB_ID is unset");
  if (job->empty()) return absl::InvalidArgumentError(absl::StrCat(name, " is empty"));
  s.job_id = *job;

  RETURN_IF_ERROR(ReadInt(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"}, 1,
                          /*required=*/true, &s.num_tasks));
  RETURN_IF_ERROR(ReadInt(env, {"SLURM_PROCID"}, 0, /*required=*/true, &s.proc_id));
  RETURN_IF_ERROR(ReadInt(env, {"SLURM_LOCALID"}, 0, /*required=*/false, &s.local_id));
  RETURN_IF_ERROR(ReadInt(env, {"SLURM_NODEID"}, 0, /*required=*/false, &s.node_id));
  RETURN_IF_ERROR(ReadInt(env, {"SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES"}, 1,
                          /*required=*/false, &s.num_nodes));
  int restarts = 0;
  RETURN_IF_ERROR(ReadInt(env, {"SLURM_RESTART_COUNT"}, 0, /*required=*/false, &restarts));
  s.restart_count = restarts;
  const char* step_name = nullptr;
  if (const std::string* v = FindFirst(env, {"SLURM_STEP_ID", "SLURM_STEPID"}, &step_name)) {
    int64_t step = 0;
    if (v->empty() || v->size() > 10 || v->find_first_not_of("0123456789") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(step_name, "=", *v, " is not a step number"));
    }
    for (char c : *v) step = step * 10 + (c - '0');
    if (step > 0xFFFFFFFFLL) {
      return absl::InvalidArgumentError(absl::StrCat(step_name, "=", *v, " is out of range"));
    }
    s.step_id = step >= 0xFFFFFFF0LL ? -1 : step;
  }
  if (const std::string* v = Find(env, "SLURMD_NODENAME")) s.node_name = *v;
  if (const std::string* v = Find(env, "CUDA_VISIBLE_DEVICES")) {
    s.step_gpus = CountVisibleDevices(*v);
  }

  if (s.proc_id >= s.num_tasks) {
    return absl::InvalidArgumentError(
        absl::StrCat("SLURM_PROCID=", s.proc_id, " is not below the task count ", s.num_tasks));
  }
  if (s.node_id >= s.num_nodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("SLURM_NODEID=", s.node_id, " is not below the node count ", s.num_nodes));
  }
  const std::string* tpn =
      FindFirst(env, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}, &name);
  if (tpn != nullptr) {
    auto list = ParseTasksPerNode(*tpn);
    if (!list.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": ", list.status().message()));
    }
    s.tasks_per_node = *std::move(list);
    if (static_cast<int>(s.tasks_per_node.size()) != s.num_nodes) {
      return absl::InvalidArgumentError(absl::StrCat(name, "='", *tpn, "' lists ",
                                                     s.tasks_per_node.size(),
                                                     " nodes but the step has ", s.num_nodes));
    }
    int64_t total = 0;
    for (int n : s.tasks_per_node) total += n;
    if (total != s.num_tasks) {
      return absl::InvalidArgumentError(absl::StrCat(name, "='", *tpn, "' sums to ", total,
                                                     " tasks but the step has ", s.num_tasks));
    }
    s.tasks_on_this_node = s.tasks_per_node[static_cast<size_t>(s.node_id)];
  } else {
    if (s.num_tasks % s.num_nodes != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("SLURM_STEP_TASKS_PER_NODE is unset and ", s.num_tasks,
                       " tasks do not divide evenly over ", s.num_nodes, " nodes"));
    }
    s.tasks_on_this_node = s.num_tasks / s.num_nodes;
    s.tasks_per_node.assign(static_cast<size_t>(s.num_nodes), s.tasks_on_this_node);
  }
  if (s.local_id >= s.tasks_on_this_node) {
    return absl::InvalidArgumentError(absl::StrCat("SLURM_LOCALID=", s.local_id,
                                                   " is not below the tasks on this node (",
                                                   s.tasks_on_this_node, ")"));
  }
  return s;
}

}  // namespace ddp
