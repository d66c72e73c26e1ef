// `ddpctl status [--json] [--all] [--events N] [--from FILE]`: one snapshot of the job. The JSON
// form is the contract of docs/architecture.md, "Status JSON", and byte-identical to the
// coordinator's /api/status. With --from, the view of a saved status JSON (from /api/status or
// `status --json`), shown as that JSON says, flags and all.
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
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
  std::string from;
};

// The status a saved JSON file holds ("-": standard input).
absl::StatusOr<JobStatus> ReadSaved(const std::string& path) {
  std::ostringstream text;
  if (path == "-") {
    text << std::cin.rdbuf();
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
    text << in.rdbuf();
  }
  return FromJson(text.str());
}

ToolRun Setup(CLI::App* sub) {
  auto flags = std::make_shared<StatusFlags>();
  sub->add_flag("--json", flags->json,
                "Print one JSON object (the /api/status contract: job_id, state, world_size, "
                "registered, epoch, epochs, step, steps_per_epoch, loss, samples_per_second, "
                "ranks[], failed_rank, failure_reason, failure {rank, cause, text}, ...)");
  sub->add_flag("--all", flags->all, "List every rank (default: 32, flagged ranks first)");
  sub->add_option("--events", flags->events, "Recent events to show")->check(CLI::Range(0, 1000));
  sub->add_option("--from", flags->from,
                  "Show a saved status JSON (a file, or - for stdin) instead of asking the job");
  sub->footer(absl::StrCat(
      "The coordinator flags ranks (failed, lost, stalled; silent: no heartbeat for over 2 s; "
      "behind: step trails the median by more than max(2, 1%)); they are listed first. A failed "
      "job shows the failed rank, the cause and the reason first.\nExit codes: ",
      kExitOk, " status printed, ", kExitFailed,
      " error (no job, unreachable or stale coordinator, wrong token), ", kExitUsage, " usage."));
  return [flags](const GlobalOptions& global) {
    absl::StatusOr<JobStatus> status;
    if (!flags->from.empty()) {
      if (flags->json) return Fail("--from shows a saved JSON; it has no --json form");
      status = ReadSaved(flags->from);
    } else {
      auto client = ConnectOperator(global, TokenRole::kView);
      if (!client.ok()) return Fail(std::string(client.status().message()));
      status = (*client)->GetStatus();
      if (status.ok()) DecideStatus(&*status);  // the protobuf carries no decided fields
    }
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
