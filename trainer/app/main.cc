// ddp-trainer: what `srun` runs. Parses flags, then either launches this task's workers (and, on
// task 0, the job's coordinator) or, when re-executed by the launcher, is one worker.
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <string>

#include "common/slurm_env.h"
#include "trainer/app/config.h"
#include "trainer/app/launch_plan.h"
#include "trainer/app/launcher.h"
#include "trainer/app/worker.h"

int main(int argc, char** argv) {
  int exit_code = ddp::kExitOk;
  auto config = ddp::ParseTrainerFlags(argc, argv, &exit_code);
  if (!config.ok()) {
    if (!config.status().message().empty()) {
      std::fprintf(stderr, "ddp-trainer: %s (see --help)\n",
                   std::string(config.status().message()).c_str());
    }
    return exit_code;
  }
  const ddp::EnvMap env = ddp::ProcessEnvironment();
  try {
    if (config->internal_worker) {
      auto placement = ddp::PlacementFromEnv(env);
      if (!placement.ok()) {
        std::fprintf(stderr, "ddp-trainer: %s\n",
                     std::string(placement.status().message()).c_str());
        return ddp::kExitUsage;
      }
      return ddp::RunWorker(*config, *placement);
    }
    auto plan = ddp::PlanLaunch(*config, env, ddp::CountVisibleGpus(env), getpid());
    if (!plan.ok()) {
      std::fprintf(stderr, "ddp-trainer: %s\n", std::string(plan.status().message()).c_str());
      return ddp::kExitUsage;
    }
    return ddp::RunLauncher(*plan, *config, argc, argv);
  } catch (const std::exception& e) {
    // The one boundary where exceptions (c10::Error, std::) become an exit code.
    std::string what = e.what();
    std::fprintf(stderr, "ddp-trainer: %s\n", what.substr(0, what.find('\n')).c_str());
    return ddp::kExitFailed;
  }
}
