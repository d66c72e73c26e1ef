#include "client/heartbeat_relay.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/relay_link.h"
#include "client/rpc_channel.h"
#include "proto/convert.h"
#include "proto/coordinator.grpc.pb.h"

namespace ddp {

namespace pb = ::slurm_ddp::v1;

namespace {

// The default sender: the node's own connection to the coordinator, opened on first use and
// again after a failure.
class CoordinatorSender {
 public:
  explicit CoordinatorSender(ConnectOptions options) : options_(std::move(options)) {
    options_.dist_file_timeout = absl::ZeroDuration();  // the workers found it already
  }

  absl::Status Send(const pb::NodeHeartbeatRequest& req, pb::NodeHeartbeatReply* reply) {
    if (channel_ == nullptr) {
      absl::StatusOr<std::unique_ptr<RpcChannel>> ch = RpcChannel::Open(options_);
      if (!ch.ok()) {
        return absl::UnavailableError(absl::StrCat("NodeHeartbeat: ", ch.status().message()));
      }
      channel_ = *std::move(ch);
    }
    return channel_->Call("NodeHeartbeat", channel_->rpc_timeout(), [&](grpc::ClientContext* ctx) {
      return channel_->stub().NodeHeartbeat(ctx, req, reply);
    });
  }

 private:
  ConnectOptions options_;
  std::unique_ptr<RpcChannel> channel_;
};

void CloseFd(int fd) {
  if (fd >= 0) ::close(fd);
}

}  // namespace

class HeartbeatRelay::Impl {
 public:
  Impl(HeartbeatRelayOptions options, NodeBeatSender sender)
      : options_(std::move(options)), sender_(std::move(sender)) {}

  ~Impl() {
    stop_.store(true);
    Wake();
    if (thread_.joinable()) thread_.join();
    CloseFd(wake_[0]);
    CloseFd(wake_[1]);
    absl::MutexLock lock(&mu_);
    for (const Socket& s : sockets_) {
      CloseFd(s.relay_end);
      CloseFd(s.worker_end);
    }
  }

  absl::Status Start() {
    if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
      return absl::InternalError(absl::StrCat("heartbeat relay: pipe: ", std::strerror(errno)));
    }
    // The thread inherits a mask that blocks every signal: they are the launcher's to take.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    thread_ = std::thread([this] { Loop(); });
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return absl::OkStatus();
  }

  absl::StatusOr<int> AddWorker() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("heartbeat relay: socketpair: ", std::strerror(errno)));
    }
    {
      absl::MutexLock lock(&mu_);
      sockets_.push_back(Socket{fds[0], fds[1]});
    }
    Wake();
    return fds[1];
  }

  int64_t calls() const { return calls_.load(); }
  int64_t beats() const { return beats_.load(); }

 private:
  struct Socket {
    int relay_end;
    int worker_end;
  };
  struct Waiting {
    int pid = 0;
    uint64_t seq = 0;
    pb::HeartbeatRequest beat;
    absl::Time since;
    bool now = false;  // the worker waits on it: no batching
  };
  struct Link {
    int fd;
    std::optional<Waiting> waiting;
  };

  void Wake() {
    const char c = 1;
    ssize_t ignored = ::write(wake_[1], &c, 1);
    (void)ignored;
  }

  void TakeNewSockets(std::vector<Link>* links) {
    char drain[64];
    while (::read(wake_[0], drain, sizeof(drain)) > 0) {
    }
    absl::MutexLock lock(&mu_);
    for (size_t i = links->size(); i < sockets_.size(); ++i) {
      links->push_back(Link{sockets_[i].relay_end, std::nullopt});
    }
  }

  // Reads every packet waiting on `link`; the newest request wins (a worker has at most one
  // heartbeat out, so an older one was given up on).
  void Read(Link* link, std::vector<char>* buf) {
    while (true) {
      const ssize_t n = ::recv(link->fd, buf->data(), buf->size(), MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // EAGAIN; the worker end stays open here, so never EOF
      pb::RelayedHeartbeat in;
      if (!in.ParseFromArray(buf->data(), static_cast<int>(n))) continue;
      Waiting w;
      w.pid = in.pid();
      w.seq = in.seq();
      w.beat = std::move(*in.mutable_beat());
      w.since = link->waiting ? link->waiting->since : absl::Now();
      w.now = in.now();
      link->waiting = std::move(w);
    }
  }

  // When the waiting heartbeats are due (every link has one, one is waited on now, or the
  // oldest waited the window); nullopt when none waits.
  std::optional<absl::Time> DueAt(const std::vector<Link>& links) const {
    std::optional<absl::Time> oldest;
    bool all = !links.empty();
    bool now = false;
    for (const Link& l : links) {
      if (!l.waiting) {
        all = false;
        continue;
      }
      now = now || l.waiting->now;
      if (!oldest || l.waiting->since < *oldest) oldest = l.waiting->since;
    }
    if (oldest && now) return absl::InfinitePast();
    if (!oldest) return std::nullopt;
    return all ? absl::InfinitePast() : *oldest + options_.batch_window;
  }

  void Flush(std::vector<Link>* links) {
    pb::NodeHeartbeatRequest req;
    req.set_node_rank(options_.node_rank);
    std::vector<Link*> sent;
    for (Link& l : *links) {
      if (!l.waiting) continue;
      *req.add_beats() = l.waiting->beat;
      sent.push_back(&l);
    }
    pb::NodeHeartbeatReply reply;
    const absl::Status st = sender_(req, &reply);
    calls_.fetch_add(1);
    beats_.fetch_add(static_cast<int64_t>(sent.size()));
    for (size_t i = 0; i < sent.size(); ++i) {
      Link* l = sent[i];
      pb::RelayedHeartbeatReply out;
      out.set_pid(l->waiting->pid);
      out.set_seq(l->waiting->seq);
      if (!st.ok()) {
        ToProto(st, out.mutable_result());  // the call failed: every beat in it did
      } else if (static_cast<int>(i) < reply.replies_size()) {
        *out.mutable_result() = reply.replies(static_cast<int>(i));
      } else {
        ToProto(absl::InternalError("NodeHeartbeat: the reply has fewer results than beats"),
                out.mutable_result());
      }
      l->waiting.reset();
      const std::string packet = out.SerializeAsString();
      // A worker that is gone (or not reading) loses its reply; never block on it.
      ssize_t ignored = ::send(l->fd, packet.data(), packet.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      (void)ignored;
    }
  }

  void Loop() {
    std::vector<Link> links;
    std::vector<char> buf(kMaxRelayPacket);
    std::vector<pollfd> fds;
    while (!stop_.load()) {
      fds.assign(1, pollfd{wake_[0], POLLIN, 0});
      for (const Link& l : links) fds.push_back(pollfd{l.fd, POLLIN, 0});
      int timeout_ms = -1;
      if (const std::optional<absl::Time> due = DueAt(links)) {
        const absl::Duration left = *due - absl::Now();
        timeout_ms = left <= absl::ZeroDuration()
                         ? 0
                         : static_cast<int>(absl::ToInt64Milliseconds(left)) + 1;
      }
      const int ready = ::poll(fds.data(), fds.size(), timeout_ms);
      if (ready < 0 && errno != EINTR) {
        // Not expected (poll fails on bad arguments or no memory); the workers' heartbeats now
        // time out, which they report as an unanswered coordinator.
        std::fprintf(stderr, "ddp-trainer: the heartbeat relay stopped: poll: %s\n",
                     std::strerror(errno));
        return;
      }
      for (size_t i = 0; i < links.size(); ++i) {
        if (fds[i + 1].revents & POLLIN) Read(&links[i], &buf);
      }
      // After the reads, so that every worker added before a beat just read was sent counts
      // toward "every link has one": taken before the poll instead, a worker added while the
      // loop was between the two went uncounted and the beats flushed without waiting for it.
      TakeNewSockets(&links);
      if (const std::optional<absl::Time> due = DueAt(links); due && *due <= absl::Now()) {
        Flush(&links);
      }
    }
  }

  const HeartbeatRelayOptions options_;
  NodeBeatSender sender_;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> calls_{0};
  std::atomic<int64_t> beats_{0};
  absl::Mutex mu_;
  std::vector<Socket> sockets_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

HeartbeatRelay::HeartbeatRelay(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HeartbeatRelay::~HeartbeatRelay() = default;

absl::StatusOr<std::unique_ptr<HeartbeatRelay>> HeartbeatRelay::StartWithSender(
    HeartbeatRelayOptions options, NodeBeatSender sender) {
  auto impl = std::make_unique<Impl>(std::move(options), std::move(sender));
  if (absl::Status st = impl->Start(); !st.ok()) return st;
  return std::unique_ptr<HeartbeatRelay>(new HeartbeatRelay(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<HeartbeatRelay>> HeartbeatRelay::Start(
    HeartbeatRelayOptions options) {
  auto sender = std::make_shared<CoordinatorSender>(options.connect);
  return StartWithSender(std::move(options), [sender](const pb::NodeHeartbeatRequest& req,
                                                      pb::NodeHeartbeatReply* reply) {
    return sender->Send(req, reply);
  });
}

absl::StatusOr<int> HeartbeatRelay::AddWorker() { return impl_->AddWorker(); }
int64_t HeartbeatRelay::calls() const { return impl_->calls(); }
int64_t HeartbeatRelay::beats() const { return impl_->beats(); }

}  // namespace ddp
