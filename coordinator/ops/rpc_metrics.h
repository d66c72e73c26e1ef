// The request counters of /metrics: RpcMetrics counts every gRPC call by method and status code
// and keeps a latency histogram per method, and counts HTTP requests by path and code. Recording
// is lock-free (atomics in a table fixed at construction), so the heartbeat path pays a few
// relaxed increments. Metric names: ddp_rpc_requests_total{method,code},
// ddp_rpc_duration_seconds{method} (histogram), ddp_http_requests_total{path,code}. The job's
// gauges are in job_metrics.h.
//
// Thread safety: Record, RecordHttp, Count and AppendPrometheus are safe from any thread.
#ifndef SLURM_DDP_COORDINATOR_OPS_RPC_METRICS_H_
#define SLURM_DDP_COORDINATOR_OPS_RPC_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ddp {

class RpcMetrics {
 public:
  // Upper bounds of the latency buckets, in seconds (+Inf is implicit).
  static constexpr std::array<double, 12> kBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                      0.01,   0.025,   0.05,   0.1,   0.5,    2.5};

  // `methods`: the RPC method names (e.g. "Heartbeat"); calls to others count as "other".
  explicit RpcMetrics(const std::vector<std::string>& methods);
  RpcMetrics(const RpcMetrics&) = delete;
  RpcMetrics& operator=(const RpcMetrics&) = delete;

  // `method` may be a full gRPC path ("/pkg.Service/Heartbeat"); `code` is a gRPC status code.
  void Record(absl::string_view method, int code, absl::Duration latency);
  // An HTTP request to one of the endpoint's paths (unknown paths count as "other").
  void RecordHttp(absl::string_view path, int code);

  void AppendPrometheus(std::string* out) const;
  // Calls recorded for `method` (tests).
  uint64_t Count(absl::string_view method) const;

 private:
  static constexpr int kCodes = 17;  // gRPC status codes 0..16
  struct Method {
    std::string name;
    std::array<std::atomic<uint64_t>, kCodes> by_code{};
    std::array<std::atomic<uint64_t>, kBuckets.size() + 1> buckets{};  // last: +Inf
    std::atomic<uint64_t> sum_ns{0};
  };
  int Index(absl::string_view method) const;

  std::vector<std::unique_ptr<Method>> methods_;  // fixed after construction; last: "other"
  static constexpr std::array<const char*, 5> kHttpPaths = {"/", "/api/status", "/api/history",
                                                            "/metrics", "other"};
  struct HttpCounts {
    std::atomic<uint64_t> ok{0};
    std::atomic<uint64_t> unauthorized{0};
    std::atomic<uint64_t> other{0};
  };
  std::array<HttpCounts, kHttpPaths.size()> http_{};
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_OPS_RPC_METRICS_H_
