// `ddpctl status [--json]`: one snapshot of the job (the JSON form is DESIGN.md's contract).
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "client/ddpctl/tool.h"
#include "common/job_status.h"

namespace ddp {
namespace {

void PrintHuman(const JobStatus& s, std::ostream& out) {
  out << absl::StrFormat("job %s (generation %d): %s%s\n", s.job_id, s.generation,
                         JobStateName(s.state), s.finished ? " (finished)" : "");
  out << absl::StrFormat("workers: %d of %d registered", s.registered, s.world_size);
  if (s.num_nodes > 0) out << absl::StrFormat(" on %d node(s)", s.num_nodes);
  out << "\n";
  if (s.state != JobState::kRegistering) {
    out << absl::StrFormat("epoch %d/%d  step %d", s.epoch, s.epochs, s.step);
    if (s.steps_per_epoch > 0) out << absl::StrFormat(" (%d per epoch)", s.steps_per_epoch);
    out << absl::StrFormat("  loss %.4g  %.1f samples/s", s.loss, s.samples_per_second);
    if (s.eta_seconds >= 0) out << absl::StrFormat("  eta %.0fs", s.eta_seconds);
    out << "\n";
  }
  if (!s.failure_reason.empty()) out << "reason: " << s.failure_reason << "\n";
  if (s.checkpoint_epoch >= 0) {
    out << absl::StrFormat("checkpoint: epoch %d step %d %s\n", s.checkpoint_epoch,
                           s.checkpoint_step, s.checkpoint_path);
  }
  if (!s.ranks.empty()) {
    out << absl::StrFormat("%-6s %-20s %-5s %-6s %-13s %-10s %s\n", "RANK", "HOST", "NODE", "LOCAL",
                           "STATE", "STEP", "LAST SEEN");
    for (const RankStatus& r : s.ranks) {
      out << absl::StrFormat("%-6s %-20s %-5d %-6d %-13s %-10d %.1fs ago\n",
                             r.rank < 0 ? "-" : std::to_string(r.rank), r.host, r.node_rank,
                             r.local_rank, r.state, r.step, r.last_seen_seconds);
    }
  }
}

ToolRun Setup(CLI::App* sub) {
  auto json = std::make_shared<bool>(false);
  sub->add_flag("--json", *json, "Print one JSON object");
  return [json](const GlobalOptions& global) {
    auto client = ConnectOperator(global);
    if (!client.ok()) return Fail(std::string(client.status().message()));
    auto status = (*client)->GetStatus();
    if (!status.ok()) return Fail(std::string(status.status().message()));
    if (*json) {
      std::cout << ToJson(*status) << "\n";
    } else {
      PrintHuman(*status, std::cout);
    }
    return 0;
  };
}

const ToolRegistrar registrar({"status", "Show the job's state, progress and ranks", &Setup});

}  // namespace
}  // namespace ddp
