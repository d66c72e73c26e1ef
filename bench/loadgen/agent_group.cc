#include "bench/loadgen/agent_group.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "bench/loadgen/host_limits.h"
#include "common/status_macros.h"

namespace ddp::bench {

absl::StatusOr<AgentGroup> AgentGroup::Start(const std::vector<std::vector<std::string>>& argvs,
                                             const std::string& log_prefix, absl::Time deadline) {
  AgentGroup group;
  for (size_t i = 0; i < argvs.size(); ++i) {
    AgentProcess::Options o;
    o.argv = argvs[i];
    o.log_path = absl::StrCat(log_prefix, i, ".log");
    ASSIGN_OR_RETURN(auto child, AgentProcess::Start(o));
    group.agents_.push_back(std::move(child));
  }
  for (auto& a : group.agents_) {
    auto ready = a->ReadReply(deadline);
    if (!ready.ok()) {
      return absl::Status(ready.status().code(),
                          absl::StrCat("start: ", a->name(), ": ", ready.status().message()));
    }
  }
  return group;
}

absl::StatusOr<std::vector<AgentReply>> AgentGroup::Broadcast(const std::string& command,
                                                              absl::Time deadline) {
  for (auto& a : agents_) RETURN_IF_ERROR(a->WriteLine(command));
  std::vector<AgentReply> replies;
  absl::Status first = absl::OkStatus();
  for (auto& a : agents_) {
    // Read every reply even after an error, so the agents stay in step with the protocol.
    auto reply = a->ReadReply(deadline);
    if (!reply.ok()) {
      if (first.ok()) {
        first = absl::Status(reply.status().code(), absl::StrCat(command, ": ", a->name(), ": ",
                                                                 reply.status().message()));
      }
      continue;
    }
    replies.push_back(*std::move(reply));
  }
  RETURN_IF_ERROR(first);
  return replies;
}

absl::StatusOr<GroupPhase> AgentGroup::TimedPhase(const std::string& command, absl::Time deadline) {
  const int64_t start = MonotonicNanos();
  ASSIGN_OR_RETURN(const std::vector<AgentReply> replies, Broadcast(command, deadline));
  GroupPhase phase;
  int64_t last = start;
  int64_t ranked = start;
  bool all_ranked = true;
  for (const AgentReply& r : replies) {
    ASSIGN_OR_RETURN(const int64_t done, r.Int("done_ns"));
    last = std::max(last, done);
    const absl::StatusOr<int64_t> at = r.Int("ranked_ns");
    if (at.ok() && *at > 0) {
      ranked = std::max(ranked, *at);
    } else {
      all_ranked = false;
    }
  }
  phase.seconds = static_cast<double>(last - start) / 1e9;
  if (all_ranked) phase.ranked_seconds = static_cast<double>(ranked - start) / 1e9;
  ASSIGN_OR_RETURN(phase.latency, WorstOf(replies, "lat"));
  return phase;
}

absl::StatusOr<int64_t> AgentGroup::Sum(const std::vector<AgentReply>& replies,
                                        const std::string& key) {
  int64_t sum = 0;
  for (const AgentReply& r : replies) {
    ASSIGN_OR_RETURN(const int64_t v, r.Int(key));
    sum += v;
  }
  return sum;
}

absl::StatusOr<Quantiles> AgentGroup::WorstOf(const std::vector<AgentReply>& replies,
                                              const std::string& key) {
  std::vector<Quantiles> parts;
  for (const AgentReply& r : replies) {
    ASSIGN_OR_RETURN(Quantiles q, r.Summary(key));
    parts.push_back(q);
  }
  return Worst(parts);
}

absl::StatusOr<double> AgentGroup::CpuSeconds() const {
  double sum = 0;
  for (const auto& a : agents_) {
    ASSIGN_OR_RETURN(const double s, ProcessCpuSeconds(a->pid()));
    sum += s;
  }
  return sum;
}

}  // namespace ddp::bench
