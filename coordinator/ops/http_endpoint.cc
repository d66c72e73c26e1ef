#include "coordinator/ops/http_endpoint.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "coordinator/ops/dashboard_page.h"
#include "coordinator/rpc/auth.h"

namespace ddp {
namespace {

// True when `req` carries a view or control token (header or query parameter).
bool Authorized(const httplib::Request& req, const Authenticator& auth) {
  const std::string header = req.get_header_value("Authorization");
  Role role = header.empty() ? Role::kNone : auth.RoleOf(header);
  if (role == Role::kNone && req.has_param("token")) {
    role = auth.RoleOfToken(req.get_param_value("token"));
  }
  return (Roles(role) & kViewRoles) != 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(const HttpOptions& options,
                                                                  const Authenticator* auth,
                                                                  StatusCache* cache,
                                                                  History* history,
                                                                  RpcMetrics* metrics) {
  std::unique_ptr<HttpEndpoint> e(new HttpEndpoint());
  HttpLimits limits = options.limits;
  limits.threads = static_cast<size_t>(std::max(1, options.threads));
  e->server_ = std::make_unique<GuardedHttpServer>(
      limits, [metrics](int status) { metrics->RecordHttp("refused", status); });
  GuardedHttpServer& svr = *e->server_;
  // Without TCP_NODELAY a small reply waits for the client's delayed ACK (Nagle): ~40 ms for
  // a small job's /api/status instead of about one.
  svr.set_tcp_nodelay(true);
  svr.set_read_timeout(5);
  svr.set_write_timeout(5);
  svr.set_payload_max_length(64 * 1024);

  // Wraps a handler with the token check and request counting.
  auto guarded = [auth, metrics](const char* path, auto handler) {
    return [auth, metrics, path, handler](const httplib::Request& req, httplib::Response& res) {
      if (!Authorized(req, *auth)) {
        res.status = 401;
        res.set_header("WWW-Authenticate", "Bearer realm=\"slurm-ddp\"");
        res.set_content("401 unauthorized: pass Authorization: Bearer <token> or ?token=<token>\n",
                        "text/plain");
        metrics->RecordHttp(path, 401);
        return;
      }
      res.set_header("Cache-Control", "no-store");
      handler(req, res);
      metrics->RecordHttp(path, res.status == -1 ? 200 : res.status);
    };
  };
  svr.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  svr.Get("/", guarded("/", [](const httplib::Request&, httplib::Response& res) {
            res.set_content(DashboardHtml(), "text/html; charset=utf-8");
          }));
  svr.Get("/api/status",
          guarded("/api/status", [cache](const httplib::Request&, httplib::Response& res) {
            res.set_content(cache->Get()->json, "application/json");
          }));
  svr.Get("/api/history",
          guarded("/api/history", [history](const httplib::Request&, httplib::Response& res) {
            res.set_content(history->ToJson(), "application/json");
          }));
  svr.Get("/metrics",
          guarded("/metrics", [cache, metrics](const httplib::Request&, httplib::Response& res) {
            std::string text = cache->Get()->metrics;
            metrics->AppendPrometheus(&text);
            res.set_content(std::move(text), "text/plain; version=0.0.4; charset=utf-8");
          }));
  svr.set_error_handler([metrics](const httplib::Request& req, httplib::Response& res) {
    if (res.status == 404) {
      metrics->RecordHttp("other", 404);
      res.set_content(absl::StrCat("404 not found: ", req.path,
                                   " (try /, /api/status, /api/history, /metrics, /healthz)\n"),
                      "text/plain");
    }
  });

  const std::string host = options.host.empty() ? "127.0.0.1" : options.host;
  if (options.port == 0) {
    e->port_ = svr.bind_to_any_port(host);
    if (e->port_ <= 0) {
      return absl::UnavailableError(absl::StrCat("HTTP: cannot listen on ", host, ":0"));
    }
  } else {
    if (!svr.bind_to_port(host, options.port)) {
      return absl::UnavailableError(
          absl::StrCat("HTTP: cannot listen on ", host, ":", options.port, " (in use?)"));
    }
    e->port_ = options.port;
  }
  e->server_->WidenBacklog(128);
  e->thread_ = std::thread([raw = e->server_.get()] { raw->listen_after_bind(); });
  return e;
}

void HttpEndpoint::Stop() {
  if (!server_) return;
  // stop() is a no-op until the listen loop runs; give a just-started thread a moment.
  for (int i = 0; i < 200 && !server_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
}

HttpEndpoint::~HttpEndpoint() { Stop(); }

}  // namespace ddp
