// `ddpctl status [--json] [--all] [--events N]`: one snapshot of the job. The JSON form is
// the contract of docs/architecture.md, "Status JSON", and byte-identical to the coordinator's
// /api/status.
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/ddpctl/status_view.h"
#include "client/ddpctl/tool.h"
#include "common/job_status.h"

namespace ddp {
namespace {

struct StatusFlags {
  bool json = false;
  bool all = false;
  int events = 5;
};

ToolRun Setup(CLI::App* sub) {
  auto flags = std::make_shared<StatusFlags>();
  sub->add_flag("--json", flags->json,
                "Print one JSON object (the /api/status contract: job_id, state, world_size, "
                "registered, epoch, epochs, step, steps_per_epoch, loss, samples_per_second, "
                "ranks[], failed_rank, failure_reason, failure {rank, cause, text}, ...)");
  sub->add_flag("--all", flags->all, "List every rank (default: 32, flagged ranks first)");
  sub->add_option("--events", flags->events, "Recent events to show")->check(CLI::Range(0, 1000));
  sub->footer(absl::StrCat(
      "Lagging ranks are flagged: BEHIND (step trails the median by more than max(2, 1%)) or "
      "SILENT (no heartbeat for over 2 s). A failed job shows the failed rank, the cause and the "
      "reason first.\nExit codes: ",
      kExitOk, " status printed, ", kExitFailed,
      " error (no job, unreachable or stale coordinator, wrong token), ", kExitUsage, " usage."));
  return [flags](const GlobalOptions& global) {
    auto client = ConnectOperator(global, TokenRole::kView);
    if (!client.ok()) return Fail(std::string(client.status().message()));
    auto status = (*client)->GetStatus();
    if (!status.ok()) return Fail(std::string(status.status().message()));
    if (flags->json) {
      std::cout << ToJson(*status) << "\n";
    } else {
      ViewOptions view;
      view.max_ranks = flags->all ? 0 : 32;
      view.events = flags->events;
      std::cout << FormatStatus(*status, view);
    }
    return kExitOk;
  };
}

const ToolRegistrar registrar({"status", "Show the job's state, progress and ranks", &Setup});

}  // namespace
}  // namespace ddp
