// The operator's side of a scale run: GetStatus over a connection of its own, from the driver's
// process (neither the coordinator's nor a simulated rank's), as `ddpctl status` would call it.
// Replies are parsed into an arena, as ddpctl's OperatorClient does.
// Thread-compatible: one thread uses a probe.
#ifndef SLURM_DDP_BENCH_LOADGEN_STATUS_PROBE_H_
#define SLURM_DDP_BENCH_LOADGEN_STATUS_PROBE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/loadgen/quantiles.h"

namespace ddp::bench {

struct JobSnapshot {
  std::string state;  // REGISTERING, RUNNING, ...
  int world_size = 0;
  int registered = 0;
  int unhealthy_ranks = 0;  // ranks lost, failed or stalled
  int64_t membership_generation = 0;
  int restarts = 0;
  std::string failure;  // the job's failure reason, if it failed
  size_t bytes = 0;     // serialized size of the reply
};

struct StatusSeries {
  Quantiles latency;  // ms per GetStatus, sequential calls
  int errors = 0;
};

class StatusProbe {
 public:
  static absl::StatusOr<std::unique_ptr<StatusProbe>> Open(const std::string& address,
                                                           const std::string& token,
                                                           const std::string& tls_cert);
  ~StatusProbe();

  absl::StatusOr<JobSnapshot> Once();
  // Sequential GetStatus calls for `window`, `pause` apart.
  StatusSeries Measure(absl::Duration window, absl::Duration pause);

 private:
  struct Impl;
  explicit StatusProbe(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddp::bench

#endif  // SLURM_DDP_BENCH_LOADGEN_STATUS_PROBE_H_
