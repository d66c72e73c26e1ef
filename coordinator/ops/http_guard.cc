#include "coordinator/ops/http_guard.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace ddp {

// cpp-httplib's own handler of an accepted connection (httplib::Server::process_and_close_socket,
// private and virtual in 0.11): reads the request, answers it and closes the socket. The override
// below takes its place on the accept path, so it is called by its symbol; a library without it
// fails to link rather than misbehave.
bool HttplibServeConnection(httplib::Server* server,
                            int sock) __asm__("_ZN7httplib6Server24process_and_close_socketEi");

namespace {

// Runs httplib's per-connection task at once, on its accept thread: the override only records
// the connection there.
class InlineQueue : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

const char* Reason(int status) {
  switch (status) {
    case 408:
      return "Request Timeout";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Service Unavailable";
  }
}

const char* Why(int status) {
  switch (status) {
    case 408:
      return "the request head did not arrive in time";
    case 431:
      return "the request head is too large or has too many header lines";
    default:
      return "too many open connections";
  }
}

}  // namespace

GuardedHttpServer::GuardedHttpServer(const HttpLimits& limits, std::function<void(int)> on_refusal)
    : limits_(limits), on_refusal_(std::move(on_refusal)) {
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
  pool_ = std::make_unique<httplib::ThreadPool>(std::max<size_t>(1, limits_.threads));
  new_task_queue = [] { return new InlineQueue(); };
  set_keep_alive_max_count(1);
  set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_fd_ = sock;
  });
  watcher_ = std::thread([this] { WatchLoop(); });
}

GuardedHttpServer::~GuardedHttpServer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& [id, conn] : served_) ::shutdown(conn.watch_fd, SHUT_RDWR);
  }
  Wake();
  watcher_.join();
  pool_->shutdown();  // every served socket is shut down: each Serve returns at once
  absl::MutexLock lock(&mu_);
  for (auto& [fd, conn] : waiting_) ::close(fd);
  waiting_.clear();
  for (int fd : wake_) {
    if (fd >= 0) ::close(fd);
  }
}

void GuardedHttpServer::WidenBacklog(int backlog) {
  if (listen_fd_ >= 0) ::listen(listen_fd_, backlog);  // on a listening socket: a new backlog
}

size_t GuardedHttpServer::open_connections() const {
  absl::MutexLock lock(&mu_);
  return waiting_.size() + served_.size();
}

bool GuardedHttpServer::process_and_close_socket(socket_t sock) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  std::string peer = "?";
  char host[NI_MAXHOST];
  if (::getpeername(sock, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
      ::getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof(host), nullptr, 0,
                    NI_NUMERICHOST) == 0) {
    peer = host;
  }
  bool full = false;
  {
    absl::MutexLock lock(&mu_);
    size_t& from_peer = per_peer_[peer];
    full = stopping_ || waiting_.size() + served_.size() >= limits_.max_connections ||
           from_peer >= limits_.max_connections_per_peer;
    if (full) {
      if (from_peer == 0) per_peer_.erase(peer);
    } else {
      ++from_peer;
      waiting_[sock] = Conn{absl::Now() + limits_.head_timeout, peer, -1};
    }
  }
  if (full) {
    Refuse(sock, 503);
    return false;
  }
  Wake();
  return true;
}

void GuardedHttpServer::ForgetLocked(const Conn& conn) {
  auto it = per_peer_.find(conn.peer);
  if (it != per_peer_.end() && --it->second == 0) per_peer_.erase(it);
}

void GuardedHttpServer::Wake() {
  if (wake_[1] < 0) return;
  const char byte = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_[1], &byte, 1);  // a full pipe already wakes
}

int GuardedHttpServer::Inspect(int fd, bool hung_up) {
  std::string buf(limits_.max_head_bytes + 1, '\0');
  const ssize_t n = ::recv(fd, buf.data(), buf.size(), MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return -1;  // gone before its head
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
  const absl::string_view seen(buf.data(), static_cast<size_t>(n));
  size_t head = seen.find("\r\n\r\n");
  head = head == absl::string_view::npos ? head : head + 4;
  if (const size_t lf = seen.find("\n\n"); lf != absl::string_view::npos) {
    head = std::min(head, lf + 2);
  }
  const absl::string_view part = seen.substr(0, std::min(head, seen.size()));
  // The request line and the empty line that ends the head are not header lines.
  const size_t lines = static_cast<size_t>(std::count(part.begin(), part.end(), '\n'));
  if (lines > limits_.max_header_lines + 2) return 431;
  if (head != absl::string_view::npos) {
    if (head > limits_.max_head_bytes) return 431;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one));
    return 200;
  }
  if (seen.size() > limits_.max_head_bytes) return 431;
  if (hung_up) return -1;  // half-closed without a complete head
  // Wake the poll only when more than what was seen has arrived.
  const int lowat = static_cast<int>(seen.size() + 1);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof(lowat));
  return 0;
}

void GuardedHttpServer::Refuse(int fd, int status) {
  if (status > 0) {
    char drain[4096];  // unread input would turn the close into a reset that loses the answer
    for (int i = 0; i < 16 && ::recv(fd, drain, sizeof(drain), MSG_DONTWAIT) > 0; ++i) {
    }
    const std::string body = absl::StrCat(status, " ", Why(status), "\n");
    const std::string reply = absl::StrCat(
        "HTTP/1.1 ", status, " ", Reason(status),
        "\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: ", body.size(),
        "\r\n\r\n", body);
    [[maybe_unused]] ssize_t n =
        ::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::shutdown(fd, SHUT_WR);
    if (on_refusal_) on_refusal_(status);
  }
  ::close(fd);
}

void GuardedHttpServer::Serve(uint64_t id, int fd) {
  HttplibServeConnection(this, fd);  // closes fd
  absl::MutexLock lock(&mu_);
  auto it = served_.find(id);
  if (it != served_.end()) {
    ::close(it->second.watch_fd);
    ForgetLocked(it->second);
    served_.erase(it);
  }
}

void GuardedHttpServer::WatchLoop() {
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back({wake_[0], POLLIN, 0});
    absl::Time now = absl::Now();
    absl::Time next = now + absl::Seconds(1);
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      for (const auto& [fd, conn] : waiting_) {
        fds.push_back({fd, static_cast<short>(POLLIN | POLLRDHUP), 0});
        next = std::min(next, conn.deadline);
      }
      for (const auto& [id, conn] : served_) next = std::min(next, conn.deadline);
    }
    const int64_t wait_ms = std::clamp<int64_t>(absl::ToInt64Milliseconds(next - now) + 1, 0, 1000);
    ::poll(fds.data(), fds.size(), static_cast<int>(wait_ms));
    if (fds[0].revents != 0) {
      char sink[64];
      while (::read(wake_[0], sink, sizeof(sink)) > 0) {
      }
    }
    now = absl::Now();
    std::vector<std::pair<int, int>> refused;     // socket, status (-1: close quietly)
    std::vector<std::pair<uint64_t, int>> ready;  // id, socket
    {
      absl::MutexLock lock(&mu_);
      for (size_t i = 1; i < fds.size(); ++i) {
        auto it = waiting_.find(fds[i].fd);
        if (it == waiting_.end()) continue;
        int verdict = 0;
        if (fds[i].revents != 0) {
          const bool hung_up = (fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
          verdict = Inspect(fds[i].fd, hung_up);
        }
        if (verdict == 0 && now >= it->second.deadline) verdict = 408;
        if (verdict == 0) continue;
        const int fd = it->first;
        Conn conn = std::move(it->second);
        waiting_.erase(it);
        if (verdict != 200) {
          ForgetLocked(conn);
          refused.emplace_back(fd, verdict);
          continue;
        }
        const uint64_t id = next_id_++;
        conn.deadline = now + limits_.connection_timeout;
        conn.watch_fd = ::dup(fd);
        served_[id] = std::move(conn);
        ready.emplace_back(id, fd);
      }
      for (auto& [id, conn] : served_) {
        if (now < conn.deadline) continue;
        ::shutdown(conn.watch_fd, SHUT_RDWR);  // a client that will not read its answer
        conn.deadline = absl::InfiniteFuture();
      }
    }
    for (const auto& [fd, status] : refused) Refuse(fd, status);
    for (const auto& [id, fd] : ready) {
      pool_->enqueue([this, id = id, fd = fd] { Serve(id, fd); });
    }
  }
}

}  // namespace ddp
