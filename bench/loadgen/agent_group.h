// The agent processes of one scale run, driven together: a command goes to every agent before
// any reply is read, so all of them start a phase within microseconds of each other; the phase
// ends when the last agent's last rank is done (agents report CLOCK_MONOTONIC times, which all
// processes on the host share). The destructor kills and reaps every agent.
// Thread-compatible: one thread drives the group.
#ifndef SLURM_DDP_BENCH_LOADGEN_AGENT_GROUP_H_
#define SLURM_DDP_BENCH_LOADGEN_AGENT_GROUP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/loadgen/agent_line.h"
#include "bench/loadgen/agent_process.h"
#include "bench/loadgen/quantiles.h"

namespace ddp::bench {

// A phase over all agents.
struct GroupPhase {
  double seconds = 0;  // command sent -> the last rank of any agent done
  // Command sent -> the last rank holding its rank (gRPC; before its shard); -1 when not
  // recorded by every agent.
  double ranked_seconds = -1;
  Quantiles latency;  // per rank, the worst agent's (Worst of their summaries)
};

class AgentGroup {
 public:
  // Starts `argvs.size()` agents, logging to <log_prefix><i>.log, and waits (by `deadline`)
  // until each has said it is ready.
  static absl::StatusOr<AgentGroup> Start(const std::vector<std::vector<std::string>>& argvs,
                                          const std::string& log_prefix, absl::Time deadline);

  // Sends `command` to every agent, then collects every reply (by `deadline`). The first error
  // (an agent's `error` line, a dead agent, a time-out) is returned, naming the agent.
  absl::StatusOr<std::vector<AgentReply>> Broadcast(const std::string& command,
                                                    absl::Time deadline);
  // Broadcast of a timed phase: replies carry done_ns and lat_* (ddp-rankgen, tcpstore agents).
  absl::StatusOr<GroupPhase> TimedPhase(const std::string& command, absl::Time deadline);

  // Sum of an integer field over replies; the worst of a summary field.
  static absl::StatusOr<int64_t> Sum(const std::vector<AgentReply>& replies,
                                     const std::string& key);
  static absl::StatusOr<Quantiles> WorstOf(const std::vector<AgentReply>& replies,
                                           const std::string& key);

  // User + system CPU seconds of all agents so far.
  absl::StatusOr<double> CpuSeconds() const;
  size_t size() const { return agents_.size(); }

 private:
  std::vector<std::unique_ptr<AgentProcess>> agents_;
};

}  // namespace ddp::bench

#endif  // SLURM_DDP_BENCH_LOADGEN_AGENT_GROUP_H_
