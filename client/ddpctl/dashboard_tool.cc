// `ddpctl dashboard`: prints the dashboard URL with the job's view token
// (http://host:port/?token=...): view-only, safe to share.
#include <iostream>
#include <memory>
#include <string>

#include "client/ddpctl/tool.h"
#include "common/exit_codes.h"

namespace ddp {
namespace {

ToolRun Setup(CLI::App* sub) {
  sub->footer(
      "The URL carries the job's view token: it shows the dashboard, /api/status and /metrics "
      "(Authorization: Bearer <token>) but can neither stop the job nor touch its store, so it "
      "is safe to share with a teammate.\n"
      "Exit codes: 0 printed, 1 error (no job, unreachable, no HTTP endpoint), 2 usage.");
  return [](const GlobalOptions& global) {
    auto client = ConnectOperator(global, TokenRole::kView);
    if (!client.ok()) return Fail(std::string(client.status().message()));
    auto url = (*client)->DashboardUrl();
    if (!url.ok()) return Fail(std::string(url.status().message()));
    std::cout << *url << "\n";
    return kExitOk;
  };
}

const ToolRegistrar registrar({"dashboard",
                               "Print the job's dashboard URL (view-only token, safe to share)",
                               &Setup});

}  // namespace
}  // namespace ddp
