// The coordinator's HTTP endpoint (cpp-httplib), started beside the gRPC server on the same host:
//   /             the dashboard: one self-contained HTML page (inline JS/CSS) polling the APIs
//   /api/status   the status JSON, byte for byte what `ddpctl status --json` prints
//   /api/history  chart series (coordinator/ops/history.h)
//   /metrics      Prometheus text exposition (rpc_metrics.h, job_metrics.h)
//   /healthz      "ok" (liveness; the only path without a token)
// Every other path needs the job's token: `Authorization: Bearer <token>` or `?token=<token>`;
// a missing or wrong one gets 401. Responses are served from StatusCache snapshots, so a request
// never builds a status or takes the job's locks. Requests run on a bounded thread pool.
//
// Thread safety: Start/Stop/destructor from one owning thread; port() anywhere.
#ifndef SLURM_DDP_COORDINATOR_OPS_HTTP_ENDPOINT_H_
#define SLURM_DDP_COORDINATOR_OPS_HTTP_ENDPOINT_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "coordinator/ops/history.h"
#include "coordinator/ops/rpc_metrics.h"
#include "coordinator/ops/status_cache.h"

namespace httplib {
class Server;
}

namespace ddp {

struct HttpOptions {
  std::string host = "127.0.0.1";  // "0.0.0.0" listens everywhere
  int port = 0;                    // 0 = ephemeral
  std::string token;
  int threads = 8;  // concurrent requests (keep-alive connections hold one each)
};

class HttpEndpoint {
 public:
  // The pointers must outlive the endpoint.
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(const HttpOptions& options,
                                                             StatusCache* cache, History* history,
                                                             RpcMetrics* metrics);
  ~HttpEndpoint();
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  int port() const { return port_; }
  // Stops listening and joins the server thread. Idempotent.
  void Stop();

 private:
  HttpEndpoint() = default;

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_OPS_HTTP_ENDPOINT_H_
