// `ddpctl exit-codes`: the exit codes of every slurm-ddp binary (common/exit_codes.h) as
// NAME=VALUE lines, for shell scripts: `eval "$(ddpctl exit-codes)"` defines DDP_EXIT_OK,
// DDP_EXIT_RESUMABLE, ... so no script writes an exit code as a number.
#include <iostream>
#include <memory>
#include <string>

#include "client/ddpctl/tool.h"
#include "common/exit_codes.h"

namespace ddp {
namespace {

ToolRun Setup(CLI::App* sub) {
  auto explain = std::make_shared<bool>(false);
  sub->add_flag("--explain", *explain, "Add each code's meaning as a shell comment");
  sub->footer(
      "Prints NAME=VALUE lines; `eval \"$(ddpctl exit-codes)\"` defines them in a shell. Needs "
      "no job.\nExit codes: 0 printed, 2 usage.");
  return [explain](const GlobalOptions&) {
    for (const ExitCodeEntry& e : kExitCodeTable) {
      std::cout << e.name << "=" << e.value;
      if (*explain) std::cout << "  # " << e.meaning;
      std::cout << "\n";
    }
    return 0;
  };
}

const ToolRegistrar registrar(
    {"exit-codes", "Print the exit codes of every binary as NAME=VALUE lines (for scripts)",
     &Setup});

}  // namespace
}  // namespace ddp
