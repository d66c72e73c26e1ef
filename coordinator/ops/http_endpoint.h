// The coordinator's HTTP endpoint (cpp-httplib), started beside the gRPC server on the same host:
//   /             the dashboard: one self-contained HTML page (inline JS/CSS) polling the APIs
//   /api/status   the status JSON, byte for byte what `ddpctl status --json` prints
//   /api/history  chart series (coordinator/ops/history.h)
//   /metrics      Prometheus text exposition (rpc_metrics.h, job_metrics.h)
//   /healthz      "ok" (liveness; the only path without a token)
// Every other path needs the view or control token (never the worker token): `Authorization:
// Bearer <token>` or `?token=<token>`; a missing or wrong one gets 401. Responses are served
// from StatusCache snapshots, so a request never builds a status or takes the job's locks. Requests
// run on a bounded thread pool, once their head has arrived complete (http_guard.h: slow or
// oversized heads cannot hold a thread).
//
// Thread safety: Start/Stop/destructor from one owning thread; port() anywhere.
#ifndef SLURM_DDP_COORDINATOR_OPS_HTTP_ENDPOINT_H_
#define SLURM_DDP_COORDINATOR_OPS_HTTP_ENDPOINT_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "coordinator/ops/history.h"
#include "coordinator/ops/http_guard.h"
#include "coordinator/ops/rpc_metrics.h"
#include "coordinator/ops/status_cache.h"
#include "coordinator/rpc/auth.h"

namespace httplib {
class Server;
}

namespace ddp {

struct HttpOptions {
  std::string host = "127.0.0.1";  // "0.0.0.0" listens everywhere
  int port = 0;                    // 0 = ephemeral
  int threads = 8;                 // requests served at once (complete heads only)
  HttpLimits limits;               // head size, header lines, timeouts, connections (http_guard.h)
};

class HttpEndpoint {
 public:
  // The pointers must outlive the endpoint.
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(const HttpOptions& options,
                                                             const Authenticator* auth,
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

  std::unique_ptr<GuardedHttpServer> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_OPS_HTTP_ENDPOINT_H_
