// An httplib::Server that slow or hostile clients cannot starve. cpp-httplib 0.11 (Debian's) gives
// every accepted connection a pool thread that waits, recv by recv, for the request head, with no
// bound on the head's total time, size or header count: a handful of clients sending a byte a
// second hold every thread. GuardedHttpServer takes each accepted connection first, and one
// thread watches all of them (poll) until the head is complete; only then is the connection
// handed to a pool thread, which finds the head already in the kernel's buffer. Limits, each
// answered at once with a one-line error and the connection closed:
//   - the head (request line and headers) must arrive within head_timeout (408),
//   - in at most max_head_bytes and max_header_lines (431),
//   - at most max_connections connections open, waiting or served, and max_connections_per_peer
//     from one address (503),
//   - a served connection is shut down after connection_timeout (a client that will not read).
// One request per connection (no keep-alive), so every request passes the same checks.
//
// Thread safety: construct, then use through httplib::Server's API (listen/stop from their usual
// threads); destroy after stop() has returned and the listen thread has been joined.
#ifndef SLURM_DDP_COORDINATOR_OPS_HTTP_GUARD_H_
#define SLURM_DDP_COORDINATOR_OPS_HTTP_GUARD_H_

#include <httplib.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ddp {

struct HttpLimits {
  size_t max_head_bytes = 16 * 1024;  // request line + headers
  size_t max_header_lines = 64;
  absl::Duration head_timeout = absl::Seconds(5);
  absl::Duration connection_timeout = absl::Seconds(15);
  size_t max_connections = 256;
  size_t max_connections_per_peer = 64;  // per client address, so one host cannot take them all
  size_t threads = 8;                    // serve complete requests
};

class GuardedHttpServer : public httplib::Server {
 public:
  // `on_refusal(http status)` runs on the guard's threads for every refused connection; may be
  // empty.
  GuardedHttpServer(const HttpLimits& limits, std::function<void(int)> on_refusal);
  ~GuardedHttpServer() override;

  size_t open_connections() const;
  // After bind_to_port/bind_to_any_port: lets the kernel queue `backlog` connections not yet
  // accepted (cpp-httplib listens with 5, and drops a burst of connection attempts for 1 s).
  void WidenBacklog(int backlog);

 private:
  struct Conn {
    absl::Time deadline;
    std::string peer;   // the client's address
    int watch_fd = -1;  // a dup of the socket, to shut it down (served connections)
  };

  // httplib calls this on its accept thread for each new connection: it only records it.
  bool process_and_close_socket(socket_t sock) override;
  void WatchLoop();
  // One look at a waiting connection: 0 when it still waits, else a status to refuse it with
  // (or 200: the head is complete).
  int Inspect(int fd, bool hung_up);
  void Refuse(int fd, int status);
  void ForgetLocked(const Conn& conn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Serve(uint64_t id, int fd);
  void Wake();

  const HttpLimits limits_;
  const std::function<void(int)> on_refusal_;
  int listen_fd_ = -1;      // the listening socket, as httplib created it
  int wake_[2] = {-1, -1};  // pipe: a new connection or shutdown
  mutable absl::Mutex mu_;
  std::map<int, Conn> waiting_ ABSL_GUARDED_BY(mu_);      // by socket
  std::map<uint64_t, Conn> served_ ABSL_GUARDED_BY(mu_);  // by id (a socket number is reused)
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, size_t> per_peer_ ABSL_GUARDED_BY(mu_);  // open connections by address
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<httplib::ThreadPool> pool_;
  std::thread watcher_;
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_OPS_HTTP_GUARD_H_
