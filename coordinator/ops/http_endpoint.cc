#include "coordinator/ops/http_endpoint.h"

#include <array>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "coordinator/ops/dashboard_page.h"
#include "coordinator/rpc/auth.h"

namespace ddp {
namespace {

constexpr std::array<const char*, 4> kPages = {"/", "/api/status", "/api/history", "/metrics"};

// True when `req` carries a view or control token (header or query parameter).
bool Authorized(const HttpRequest& req, const Authenticator& auth) {
  const char* header = req.Header("Authorization");
  Role role = header == nullptr || *header == '\0' ? Role::kNone : auth.RoleOf(header);
  if (role == Role::kNone) {
    if (const char* token = req.Query("token"); token != nullptr) role = auth.RoleOfToken(token);
  }
  return (Roles(role) & kViewRoles) != 0;
}

HttpResponse Text(int status, std::string body) {
  HttpResponse res;
  res.status = status;
  res.body = std::move(body);
  return res;
}

// The checks every path shares once its token (if any) is good: the method, then the body.
// Returns 0 when the request may be served.
int Refusal(const HttpRequest& req, HttpResponse* res) {
  if (req.method() != "GET" && req.method() != "HEAD") {
    *res = Text(405, absl::StrCat("405 method not allowed: ", req.method(), " (GET only)\n"));
    res->headers.emplace_back("Allow", "GET, HEAD");
    return 405;
  }
  if (req.has_body()) {
    *res = Text(413, "413 request bodies are not accepted (GET only)\n");
    return 413;
  }
  return 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(const HttpOptions& options,
                                                                  const Authenticator* auth,
                                                                  StatusCache* cache,
                                                                  History* history,
                                                                  RpcMetrics* metrics) {
  // Runs on the server's threads, once per request, before any body is read.
  auto handle = [auth, cache, history, metrics](const HttpRequest& req) {
    HttpResponse res;
    const absl::string_view path = req.path();
    if (path == "/healthz") {
      if (Refusal(req, &res) != 0) return res;
      return Text(200, "ok\n");
    }
    const char* page = nullptr;
    for (const char* p : kPages) {
      if (path == p) page = p;
    }
    if (page == nullptr) {
      metrics->RecordHttp("other", 404);
      return Text(404, absl::StrCat("404 not found: ", path,
                                    " (try /, /api/status, /api/history, /metrics, /healthz)\n"));
    }
    if (!Authorized(req, *auth)) {
      res = Text(401, "401 unauthorized: pass Authorization: Bearer <token> or ?token=<token>\n");
      res.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"slurm-ddp\"");
      metrics->RecordHttp(page, 401);
      return res;
    }
    if (const int refused = Refusal(req, &res); refused != 0) {
      metrics->RecordHttp(page, refused);
      return res;
    }
    const absl::string_view name = page;
    if (name == "/") {
      res.content_type = "text/html; charset=utf-8";
      res.body = DashboardHtml();
    } else if (name == "/api/status") {
      res.content_type = "application/json";
      res.body = cache->Get()->json;
    } else if (name == "/api/history") {
      res.content_type = "application/json";
      res.body = history->ToJson();
    } else {
      res.content_type = "text/plain; version=0.0.4; charset=utf-8";
      res.body = cache->Get()->metrics;
      metrics->AppendPrometheus(&res.body);
    }
    res.headers.emplace_back("Cache-Control", "no-store");
    metrics->RecordHttp(page, 200);
    return res;
  };
  // A connection dropped before its first request (head too slow, too big or malformed).
  auto dropped = [metrics] { metrics->RecordHttp("refused", 0); };

  HttpServerOptions server_options;
  server_options.host = options.host;
  server_options.port = options.port;
  server_options.limits = options.limits;
  std::unique_ptr<HttpEndpoint> e(new HttpEndpoint());
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start(server_options, std::move(handle), std::move(dropped));
  if (!server.ok()) return server.status();
  e->server_ = std::move(*server);
  return e;
}

void HttpEndpoint::Stop() { server_.reset(); }

HttpEndpoint::~HttpEndpoint() { Stop(); }

}  // namespace ddp
