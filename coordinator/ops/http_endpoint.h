// The coordinator's HTTP endpoint, started beside the gRPC server on the same host:
//   /             the dashboard: one self-contained HTML page (inline JS/CSS) polling the APIs
//   /api/status   the status JSON, byte for byte what `ddpctl status --json` prints
//   /api/history  chart series (coordinator/ops/history.h)
//   /metrics      Prometheus text exposition (rpc_metrics.h, job_metrics.h)
//   /healthz      "ok" (liveness; the only path without a token)
// Every other path needs the view or control token (never the worker token): `Authorization:
// Bearer <token>` or `?token=<token>`; a missing or wrong one gets 401, an unknown path 404. These
// are GET (and HEAD) endpoints: another method gets 405, a request that announces a body 413, and
// both are decided from the head alone, after the route and the token, so no body is ever read.
// Responses are served from StatusCache snapshots, so a request never builds a status or takes
// the job's locks. Connections, slow clients and head sizes are bounded by the server
// (http_server.h: libmicrohttpd's own limits).
//
// Thread safety: Start/Stop/destructor from one owning thread; port() anywhere.
#ifndef SLURM_DDP_COORDINATOR_OPS_HTTP_ENDPOINT_H_
#define SLURM_DDP_COORDINATOR_OPS_HTTP_ENDPOINT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "coordinator/ops/history.h"
#include "coordinator/ops/http_server.h"
#include "coordinator/ops/rpc_metrics.h"
#include "coordinator/ops/status_cache.h"
#include "coordinator/rpc/auth.h"

namespace ddp {

struct HttpOptions {
  std::string host = "127.0.0.1";  // "0.0.0.0" listens everywhere
  int port = 0;                    // 0 = ephemeral
  HttpLimits limits;               // connections, idle timeout, memory, threads (http_server.h)
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

  int port() const { return server_ ? server_->port() : 0; }
  // Stops listening, closes every connection and joins the server's threads. Idempotent.
  void Stop();

 private:
  HttpEndpoint() = default;

  std::unique_ptr<HttpServer> server_;
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_OPS_HTTP_ENDPOINT_H_
