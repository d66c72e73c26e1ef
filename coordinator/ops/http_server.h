// A small HTTP/1.1 server on GNU libmicrohttpd (MHD) whose every limit is one of MHD's own public
// options (docs/security.md, "Limits (HTTP)"), so no code of ours parses or times a request:
//   - connections: at most max_connections open (MHD_OPTION_CONNECTION_LIMIT), at most
//     max_connections_per_peer from one address (MHD_OPTION_PER_IP_CONNECTION_LIMIT); one over
//     either is closed at accept, unanswered;
//   - time: a connection that makes no progress for idle_timeout, sending its head or reading its
//     answer, is closed (MHD_OPTION_CONNECTION_TIMEOUT);
//   - memory: a connection's head and bookkeeping must fit in max_connection_memory
//     (MHD_OPTION_CONNECTION_MEMORY_LIMIT); a bigger head gets MHD's own 431;
//   - threads: `threads` threads each poll (epoll) their share of the connections
//     (MHD_USE_EPOLL_INTERNAL_THREAD, MHD_OPTION_THREAD_POOL_SIZE): a connection whose head is
//     still arriving holds no thread, and the handler runs only once MHD has parsed a complete
//     head (MHD's definition of one, the only one in the process).
// The handler is called once per request, before any of its body is read, and its answer is
// queued at once: MHD then sends it, discards the body unread and closes the connection. So a
// handler that refuses requests with has_body() never accepts a body.
//
// Thread safety: Start, Stop and the destructor from one owning thread. The handler and
// on_dropped run on MHD's threads, several at once; they must be thread-safe and quick.
#ifndef SLURM_DDP_COORDINATOR_OPS_HTTP_SERVER_H_
#define SLURM_DDP_COORDINATOR_OPS_HTTP_SERVER_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct MHD_Connection;
struct MHD_Daemon;

namespace ddp {

struct HttpLimits {
  size_t max_connections = 256;              // open at once, all addresses
  size_t max_connections_per_peer = 64;      // from one client address
  int idle_timeout_seconds = 5;              // no progress for this long: closed
  size_t max_connection_memory = 16 * 1024;  // per connection: the head, headers, bookkeeping
  int threads = 2;                           // polling threads (each owns its connections)
  int listen_backlog = 128;                  // connections the kernel queues before accept
};

struct HttpServerOptions {
  std::string host = "127.0.0.1";  // a numeric address or a name; "0.0.0.0" listens everywhere
  int port = 0;                    // 0 = ephemeral
  HttpLimits limits;
};

// One request, as MHD parsed its head; valid only during the handler's call.
class HttpRequest {
 public:
  HttpRequest(MHD_Connection* connection, const char* method, const char* path)
      : connection_(connection), method_(method), path_(path) {}

  absl::string_view method() const { return method_; }
  // Percent-decoded, without the query.
  absl::string_view path() const { return path_; }
  // A header's value (case-insensitive name), or nullptr.
  const char* Header(const char* name) const;
  // A query parameter's decoded value, or nullptr.
  const char* Query(const char* name) const;
  // True when the head announces a body (Content-Length above 0, or Transfer-Encoding).
  bool has_body() const;

 private:
  MHD_Connection* connection_;
  const char* method_;
  const char* path_;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // beyond Content-Type
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  // Listens on options.host:options.port and serves every request with `handler`.
  // `on_dropped` (may be empty) runs for each connection closed before any request on it reached
  // the handler: a head that timed out, was too big or malformed, or a client that left.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           Handler handler,
                                                           std::function<void()> on_dropped);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  // Closes the listening socket and every connection, and joins MHD's threads. Idempotent.
  void Stop();

 private:
  struct DaemonDeleter {
    void operator()(MHD_Daemon* daemon) const;
  };

  HttpServer(Handler handler, std::function<void()> on_dropped)
      : handler_(std::move(handler)), on_dropped_(std::move(on_dropped)) {}

  const Handler handler_;
  const std::function<void()> on_dropped_;
  std::unique_ptr<MHD_Daemon, DaemonDeleter> daemon_;
  int port_ = 0;

  friend struct HttpServerCallbacks;
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_OPS_HTTP_SERVER_H_
