#include "coordinator/ops/http_server.h"

#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

// Public MHD API that this file relies on, checked at build time rather than found missing at
// run time: MHD_Result (0.9.71), MHD_DAEMON_INFO_BIND_PORT (0.9.66), and
// MHD_create_response_from_buffer_with_free_callback_cls (0.9.73).
#if MHD_VERSION < 0x00097300
#error "libmicrohttpd 0.9.73 or newer is required (Debian: libmicrohttpd-dev)"
#endif

namespace ddp {
namespace {

// What MHD keeps for us per connection (its "socket context"): whether any request on it reached
// the handler, so that a connection dropped before one can be reported.
struct ConnectionState {
  bool handled = false;
};

struct ResponseDeleter {
  void operator()(MHD_Response* response) const { MHD_destroy_response(response); }
};

struct AddrInfoDeleter {
  void operator()(addrinfo* info) const { freeaddrinfo(info); }
};

// host:port as the socket address MHD binds (MHD_OPTION_SOCK_ADDR).
absl::StatusOr<sockaddr_storage> Resolve(std::string host, int port) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);  // "[::1]" -> "::1"
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = absl::StrCat(port);
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  std::unique_ptr<addrinfo, AddrInfoDeleter> owned(found);
  if (rc != 0 || found == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("HTTP: cannot resolve ", host, ": ", ::gai_strerror(rc)));
  }
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family != AF_INET && a->ai_family != AF_INET6) continue;
    sockaddr_storage addr{};
    std::memcpy(&addr, a->ai_addr, a->ai_addrlen);
    return addr;
  }
  return absl::UnavailableError(absl::StrCat("HTTP: no IPv4 or IPv6 address for ", host));
}

}  // namespace

// MHD's C callbacks, with access to HttpServer's members.
struct HttpServerCallbacks {
  static MHD_Result OnRequest(void* cls, MHD_Connection* connection, const char* url,
                              const char* method, const char* /*version*/,
                              const char* /*upload_data*/, size_t* /*upload_data_size*/,
                              void** request_state) {
    // Every request is answered at its first call, which comes before any of its body is read;
    // MHD then never calls again for it. A second call would mean a body is arriving: refuse.
    if (*request_state != nullptr) return MHD_NO;
    *request_state = cls;
    const MHD_ConnectionInfo* info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (info != nullptr && info->socket_context != nullptr) {
      static_cast<ConnectionState*>(info->socket_context)->handled = true;
    }
    const HttpServer& server = *static_cast<const HttpServer*>(cls);
    HttpResponse answer = server.handler_(HttpRequest(connection, method, url));

    // The body moves into MHD's response, which frees it once sent: no copy.
    auto body = std::make_unique<std::string>(std::move(answer.body));
    const size_t size = body->size();
    void* data = body->data();
    std::unique_ptr<MHD_Response, ResponseDeleter> response(
        MHD_create_response_from_buffer_with_free_callback_cls(
            size, data, [](void* owned) { delete static_cast<std::string*>(owned); }, body.get()));
    if (response == nullptr) return MHD_NO;  // closes the connection
    body.release();                          // owned by the response now
    MHD_add_response_header(response.get(), MHD_HTTP_HEADER_CONTENT_TYPE,
                            answer.content_type.c_str());
    for (const auto& [name, value] : answer.headers) {
      MHD_add_response_header(response.get(), name.c_str(), value.c_str());
    }
    return MHD_queue_response(connection, static_cast<unsigned int>(answer.status), response.get());
  }

  static void OnConnection(void* cls, MHD_Connection* /*connection*/, void** socket_context,
                           MHD_ConnectionNotificationCode code) {
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
      *socket_context = new ConnectionState();
      return;
    }
    std::unique_ptr<ConnectionState> state(static_cast<ConnectionState*>(*socket_context));
    *socket_context = nullptr;
    const HttpServer& server = *static_cast<const HttpServer*>(cls);
    if (state != nullptr && !state->handled && server.on_dropped_) server.on_dropped_();
  }
};

const char* HttpRequest::Header(const char* name) const {
  return MHD_lookup_connection_value(connection_, MHD_HEADER_KIND, name);
}

const char* HttpRequest::Query(const char* name) const {
  return MHD_lookup_connection_value(connection_, MHD_GET_ARGUMENT_KIND, name);
}

bool HttpRequest::has_body() const {
  if (Header(MHD_HTTP_HEADER_TRANSFER_ENCODING) != nullptr) return true;
  const char* length = Header(MHD_HTTP_HEADER_CONTENT_LENGTH);
  uint64_t n = 0;
  // An unparsable length counts as a body: MHD refuses such a head itself, but never serve one.
  return length != nullptr && (!absl::SimpleAtoi(length, &n) || n > 0);
}

void HttpServer::DaemonDeleter::operator()(MHD_Daemon* daemon) const { MHD_stop_daemon(daemon); }

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              Handler handler,
                                                              std::function<void()> on_dropped) {
  const std::string host = options.host.empty() ? "127.0.0.1" : options.host;
  absl::StatusOr<sockaddr_storage> addr = Resolve(host, options.port);
  if (!addr.ok()) return addr.status();
  std::unique_ptr<HttpServer> server(new HttpServer(std::move(handler), std::move(on_dropped)));
  const HttpLimits& limits = options.limits;
  unsigned int flags = MHD_USE_EPOLL_INTERNAL_THREAD;
  if (addr->ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  const auto threads = static_cast<unsigned int>(limits.threads > 1 ? limits.threads : 1);
  // One option and its value per line.
  // clang-format off
  MHD_Daemon* daemon = MHD_start_daemon(
      flags, static_cast<uint16_t>(options.port), /*apc=*/nullptr, nullptr,
      &HttpServerCallbacks::OnRequest, server.get(),
      MHD_OPTION_SOCK_ADDR, reinterpret_cast<const sockaddr*>(&*addr),
      MHD_OPTION_CONNECTION_LIMIT, static_cast<unsigned int>(limits.max_connections),
      MHD_OPTION_PER_IP_CONNECTION_LIMIT,
      static_cast<unsigned int>(limits.max_connections_per_peer),
      MHD_OPTION_CONNECTION_TIMEOUT, static_cast<unsigned int>(limits.idle_timeout_seconds),
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, limits.max_connection_memory,
      MHD_OPTION_THREAD_POOL_SIZE, threads,
      MHD_OPTION_LISTEN_BACKLOG_SIZE, static_cast<unsigned int>(limits.listen_backlog),
      MHD_OPTION_NOTIFY_CONNECTION, &HttpServerCallbacks::OnConnection, server.get(),
      MHD_OPTION_END);
  // clang-format on
  if (daemon == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("HTTP: cannot listen on ", host, ":", options.port, " (in use?)"));
  }
  server->daemon_.reset(daemon);
  const MHD_DaemonInfo* bound = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
  server->port_ = bound != nullptr ? bound->port : options.port;
  if (server->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("HTTP: no port bound on ", host));
  }
  return server;
}

void HttpServer::Stop() { daemon_.reset(); }

HttpServer::~HttpServer() { Stop(); }

}  // namespace ddp
