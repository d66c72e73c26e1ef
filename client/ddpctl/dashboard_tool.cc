// `ddpctl dashboard`: prints the dashboard URL, token included (http://host:port/?token=...).
#include <iostream>
#include <memory>
#include <string>

#include "client/ddpctl/tool.h"
#include "common/exit_codes.h"

namespace ddp {
namespace {

ToolRun Setup(CLI::App* sub) {
  sub->footer(
      "The URL carries the job's token: share it only with people who may stop the job. The "
      "same token opens /api/status and /metrics (Authorization: Bearer <token>).\n"
      "Exit codes: 0 printed, 1 error (no job, unreachable, no HTTP endpoint), 2 usage.");
  return [](const GlobalOptions& global) {
    auto client = ConnectOperator(global);
    if (!client.ok()) return Fail(std::string(client.status().message()));
    auto url = (*client)->DashboardUrl();
    if (!url.ok()) return Fail(std::string(url.status().message()));
    std::cout << *url << "\n";
    return kExitOk;
  };
}

const ToolRegistrar registrar({"dashboard", "Print the job's dashboard URL (with token)", &Setup});

}  // namespace
}  // namespace ddp
