#include "client/heartbeat_relay.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <list>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/relay_link.h"
#include "client/relay_senders.h"
#include "common/signal_free_thread.h"
#include "proto/convert.h"
#include "proto/coordinator.pb.h"

namespace ddp {

namespace pb = ::slurm_ddp::v1;

namespace {

void CloseFd(int fd) {
  if (fd >= 0) ::close(fd);
}

// Request `i`'s outcome in a node call `method` that ended with `st` and whose reply lists
// `results` in request order: the call's error (every request in it failed), or its own result.
template <typename Results, typename Result>
void TakeResult(const absl::Status& st, const Results& results, size_t i, const char* method,
                Result* out) {
  if (!st.ok()) {
    ToWire(st, out);
  } else if (static_cast<int>(i) < results.size()) {
    *out = results.Get(static_cast<int>(i));
  } else {
    ToWire(absl::InternalError(absl::StrCat(method, ": the reply has fewer results than requests")),
           out);
  }
}

// The node calls the relay carries, by the RelayedCall field that holds the request.
enum CallKind { kRegisterCall, kRejoinCall, kShardCall, kNumCallKinds };

}  // namespace

class HeartbeatRelay::Impl {
 public:
  Impl(HeartbeatRelayOptions options, NodeCallSenders senders)
      : options_(std::move(options)), senders_(std::move(senders)) {}

  ~Impl() {
    stop_.store(true);
    Wake();
    if (thread_.joinable()) thread_.join();
    // The node calls in flight end now (a Register may wait minutes for the world).
    if (senders_.cancel) senders_.cancel();
    for (CallThread& t : call_threads_) t.thread.join();
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
    // The thread inherits a mask that blocks every signal: they are the launcher's to take. The
    // node calls' threads, started from it, inherit it in turn.
    thread_ = SignalFreeThread([this] { Loop(); });
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
      busy_.push_back(0);
    }
    Wake();
    return fds[1];
  }

  int64_t calls() const { return calls_.load(); }
  int64_t beats() const { return beats_.load(); }
  int64_t node_calls() const { return node_calls_.load(); }
  int64_t node_requests() const { return node_requests_.load(); }
  int64_t unary_calls() const { return unary_calls_.load(); }

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
  // A Register, Rejoin or GetShard waiting for its node call.
  struct PendingCall {
    size_t link = 0;
    pb::RelayedCall call;
    absl::Time since;
  };
  struct CallThread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
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

  // Reads every packet waiting on link `i`. A heartbeat replaces the one waiting (a worker has at
  // most one heartbeat out, so an older one was given up on); a node call's request joins the
  // requests of its kind.
  void Read(size_t i, std::vector<Link>* links, std::vector<char>* buf) {
    Link* link = &(*links)[i];
    while (true) {
      const ssize_t n = ::recv(link->fd, buf->data(), buf->size(), MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // EAGAIN; the worker end stays open here, so never EOF
      pb::RelayedCall in;
      if (!in.ParseFromArray(buf->data(), static_cast<int>(n))) continue;
      switch (in.call_case()) {
        case pb::RelayedCall::kBeat: {
          Waiting w;
          w.pid = in.pid();
          w.seq = in.seq();
          w.beat = std::move(*in.mutable_beat());
          w.since = link->waiting ? link->waiting->since : absl::Now();
          w.now = in.now();
          link->waiting = std::move(w);
          break;
        }
        case pb::RelayedCall::kRegisterWorker:
          pending_[kRegisterCall].push_back(PendingCall{i, std::move(in), absl::Now()});
          break;
        case pb::RelayedCall::kRejoin:
          pending_[kRejoinCall].push_back(PendingCall{i, std::move(in), absl::Now()});
          break;
        case pb::RelayedCall::kGetShard:
          pending_[kShardCall].push_back(PendingCall{i, std::move(in), absl::Now()});
          break;
        case pb::RelayedCall::kUnary:
          StartUnary(PendingCall{i, std::move(in), absl::Now()});
          break;
        default:
          break;  // nothing this relay knows
      }
    }
  }

  // When the waiting heartbeats are due (every link has one, one is waited on now, or the
  // oldest waited the window); nullopt when none waits.
  std::optional<absl::Time> BeatsDueAt(const std::vector<Link>& links) const {
    if (beats_in_flight_.load()) return std::nullopt;  // at most one NodeHeartbeat at a time
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

  // Whether every worker has a node call waiting here or in flight: then nothing more is coming
  // that a waiting request could share its call with.
  bool EveryLinkOccupied(size_t num_links) const {
    if (num_links == 0) return false;
    std::vector<bool> occupied(num_links, false);
    {
      absl::MutexLock lock(&mu_);
      for (size_t i = 0; i < num_links && i < busy_.size(); ++i) occupied[i] = busy_[i] > 0;
    }
    for (const std::vector<PendingCall>& kind : pending_) {
      for (const PendingCall& p : kind) occupied[p.link] = true;
    }
    return std::all_of(occupied.begin(), occupied.end(), [](bool b) { return b; });
  }

  // When the node calls of `kind` are due; nullopt when none waits.
  std::optional<absl::Time> CallsDueAt(int kind, bool every_link_occupied) const {
    if (pending_[kind].empty()) return std::nullopt;
    if (every_link_occupied) return absl::InfinitePast();
    absl::Time oldest = absl::InfiniteFuture();
    for (const PendingCall& p : pending_[kind]) oldest = std::min(oldest, p.since);
    return oldest + (kind == kRegisterCall ? options_.register_window : options_.call_window);
  }

  // Sends the waiting heartbeats as one NodeHeartbeat on a thread of its own, so that an
  // unreachable coordinator (the call retries until its deadline) holds no other call of the
  // workers; beats that arrive meanwhile wait for the next call.
  void FlushBeats(std::vector<Link>* links) {
    struct Sent {
      int fd;
      int pid;
      uint64_t seq;
    };
    pb::NodeHeartbeatRequest req;
    req.set_node_rank(options_.node_rank);
    std::vector<Sent> sent;
    for (Link& l : *links) {
      if (!l.waiting) continue;
      *req.add_beats() = std::move(l.waiting->beat);
      sent.push_back(Sent{l.fd, l.waiting->pid, l.waiting->seq});
      l.waiting.reset();
    }
    beats_in_flight_.store(true);
    Spawn([this, req = std::move(req), sent = std::move(sent)] {
      pb::NodeHeartbeatReply reply;
      const absl::Status st = senders_.beat ? senders_.beat(req, &reply)
                                            : absl::UnimplementedError("NodeHeartbeat: no sender");
      calls_.fetch_add(1);
      beats_.fetch_add(static_cast<int64_t>(sent.size()));
      for (size_t i = 0; i < sent.size(); ++i) {
        pb::RelayedReply out;
        out.set_pid(sent[i].pid);
        out.set_seq(sent[i].seq);
        TakeResult(st, reply.replies(), i, "NodeHeartbeat", out.mutable_beat());
        SendReply(sent[i].fd, out);  // the sockets close only after this thread ends
      }
      beats_in_flight_.store(false);
    });
  }

  // Runs `work` on a thread of its own (a node call, or a worker's own call), joined once it has
  // ended (ReapCallThreads) or when the relay goes away; the loop is woken when it ends.
  template <typename Fn>
  void Spawn(Fn work) {
    auto done = std::make_shared<std::atomic<bool>>(false);
    call_threads_.push_back(CallThread{std::thread([this, work = std::move(work), done]() mutable {
                                         work();
                                         done->store(true);
                                         Wake();
                                       }),
                                       done});
  }

  // A worker that is gone (or not reading) loses its reply; never block on it.
  static void SendReply(int fd, const pb::RelayedReply& out) {
    const std::string packet = out.SerializeAsString();
    ssize_t ignored = ::send(fd, packet.data(), packet.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)ignored;
  }

  // Starts the node call that carries every waiting request of `kind`, on a thread of its own.
  void FlushCalls(int kind) {
    std::vector<PendingCall> batch = std::move(pending_[kind]);
    pending_[kind].clear();
    {
      absl::MutexLock lock(&mu_);
      for (const PendingCall& p : batch) ++busy_[p.link];
    }
    Spawn([this, kind, batch = std::move(batch)]() mutable { RunCall(kind, std::move(batch)); });
  }

  // Makes a worker's own call for it at once, on a thread of its own.
  void StartUnary(PendingCall p) {
    Spawn([this, p = std::move(p)]() mutable { RunUnary(std::move(p)); });
  }

  void RunUnary(PendingCall p) {
    const pb::RelayedUnary& call = p.call.unary();
    std::string reply;
    absl::Status st;
    if (!senders_.unary) {
      st = absl::UnimplementedError(absl::StrCat(call.method(), ": no sender"));
    } else {
      st = senders_.unary(call.method(), call.request(), absl::Milliseconds(p.call.timeout_ms()),
                          &reply);
    }
    pb::RelayedReply out;
    out.set_pid(p.call.pid());
    out.set_seq(p.call.seq());
    ToWire(st, out.mutable_unary());
    if (st.ok()) *out.mutable_unary()->mutable_reply() = std::move(reply);
    unary_calls_.fetch_add(1);
    absl::MutexLock lock(&mu_);
    SendReply(sockets_[p.link].relay_end, out);
  }

  // Joins the node calls' threads that have ended.
  void ReapCallThreads() {
    for (auto it = call_threads_.begin(); it != call_threads_.end();) {
      if (it->done->load()) {
        it->thread.join();
        it = call_threads_.erase(it);
      } else {
        ++it;
      }
    }
  }

  // One node call of this node through `sender` (UNIMPLEMENTED without one).
  template <typename Sender, typename Req, typename Reply>
  absl::Status Send(const char* method, const Sender& sender, Req* req, absl::Duration timeout,
                    Reply* reply) const {
    req->set_node_rank(options_.node_rank);
    if (!sender) return absl::UnimplementedError(absl::StrCat(method, ": no sender"));
    return sender(*req, timeout, reply);
  }

  // Sends one node call for `batch` and hands each worker its own result.
  void RunCall(int kind, std::vector<PendingCall> batch) {
    int64_t timeout_ms = 0;
    for (const PendingCall& p : batch) timeout_ms = std::max(timeout_ms, p.call.timeout_ms());
    const absl::Duration timeout = absl::Milliseconds(timeout_ms);
    std::vector<pb::RelayedReply> out(batch.size());
    switch (kind) {
      case kShardCall: {
        pb::NodeGetShardRequest req;
        for (PendingCall& p : batch) *req.add_shards() = std::move(*p.call.mutable_get_shard());
        pb::NodeGetShardReply reply;
        const absl::Status st = Send("NodeGetShard", senders_.get_shard, &req, timeout, &reply);
        for (size_t i = 0; i < batch.size(); ++i) {
          TakeResult(st, reply.results(), i, "NodeGetShard", out[i].mutable_shard());
        }
        break;
      }
      case kRegisterCall: {
        pb::NodeRegisterRequest req;
        for (PendingCall& p : batch) {
          *req.add_workers() = std::move(*p.call.mutable_register_worker());
        }
        pb::NodeJoinReply reply;
        const absl::Status st =
            Send("NodeRegister", senders_.register_workers, &req, timeout, &reply);
        for (size_t i = 0; i < batch.size(); ++i) {
          TakeResult(st, reply.results(), i, "NodeRegister", out[i].mutable_join());
        }
        break;
      }
      default: {
        pb::NodeRejoinRequest req;
        for (PendingCall& p : batch) *req.add_workers() = std::move(*p.call.mutable_rejoin());
        pb::NodeJoinReply reply;
        const absl::Status st = Send("NodeRejoin", senders_.rejoin, &req, timeout, &reply);
        for (size_t i = 0; i < batch.size(); ++i) {
          TakeResult(st, reply.results(), i, "NodeRejoin", out[i].mutable_join());
        }
        break;
      }
    }
    node_calls_.fetch_add(1);
    node_requests_.fetch_add(static_cast<int64_t>(batch.size()));
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < batch.size(); ++i) {
      out[i].set_pid(batch[i].call.pid());
      out[i].set_seq(batch[i].call.seq());
      SendReply(sockets_[batch[i].link].relay_end, out[i]);
      --busy_[batch[i].link];
    }
  }

  void Loop() {
    std::vector<Link> links;
    std::vector<char> buf(kMaxRelayPacket);
    std::vector<pollfd> fds;
    while (!stop_.load()) {
      fds.assign(1, pollfd{wake_[0], POLLIN, 0});
      for (const Link& l : links) fds.push_back(pollfd{l.fd, POLLIN, 0});
      std::optional<absl::Time> due = BeatsDueAt(links);
      const bool occupied = EveryLinkOccupied(links.size());
      for (int k = 0; k < kNumCallKinds; ++k) {
        if (const std::optional<absl::Time> at = CallsDueAt(k, occupied)) {
          due = due ? std::min(*due, *at) : *at;
        }
      }
      int timeout_ms = -1;
      if (due) {
        const absl::Duration left = *due - absl::Now();
        timeout_ms = left <= absl::ZeroDuration()
                         ? 0
                         : static_cast<int>(absl::ToInt64Milliseconds(left)) + 1;
      }
      const int ready = ::poll(fds.data(), fds.size(), timeout_ms);
      if (ready < 0 && errno != EINTR) {
        // Not expected (poll fails on bad arguments or no memory); the workers' calls now time
        // out, which they report as an unanswered coordinator.
        std::fprintf(stderr, "ddp-trainer: the node's relay stopped: poll: %s\n",
                     std::strerror(errno));
        return;
      }
      for (size_t i = 0; i < links.size(); ++i) {
        if (fds[i + 1].revents & POLLIN) Read(i, &links, &buf);
      }
      // After the reads, so that every worker added before a beat just read was sent counts
      // toward "every link has one": taken before the poll instead, a worker added while the
      // loop was between the two went uncounted and the beats flushed without waiting for it.
      TakeNewSockets(&links);
      ReapCallThreads();
      const absl::Time now = absl::Now();
      const bool all_occupied = EveryLinkOccupied(links.size());
      for (int k = 0; k < kNumCallKinds; ++k) {
        if (const std::optional<absl::Time> at = CallsDueAt(k, all_occupied); at && *at <= now) {
          FlushCalls(k);
        }
      }
      if (const std::optional<absl::Time> at = BeatsDueAt(links); at && *at <= now) {
        FlushBeats(&links);
      }
    }
  }

  const HeartbeatRelayOptions options_;
  NodeCallSenders senders_;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> calls_{0};
  std::atomic<int64_t> beats_{0};
  std::atomic<int64_t> node_calls_{0};
  std::atomic<int64_t> node_requests_{0};
  std::atomic<int64_t> unary_calls_{0};
  std::atomic<bool> beats_in_flight_{false};
  mutable absl::Mutex mu_;
  std::vector<Socket> sockets_ ABSL_GUARDED_BY(mu_);
  std::vector<int> busy_ ABSL_GUARDED_BY(mu_);  // per socket: its requests in node calls in flight
  std::thread thread_;
  // The relay thread's own (and the destructor's, after it ended).
  std::vector<PendingCall> pending_[kNumCallKinds];
  std::list<CallThread> call_threads_;
};

HeartbeatRelay::HeartbeatRelay(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HeartbeatRelay::~HeartbeatRelay() = default;

absl::StatusOr<std::unique_ptr<HeartbeatRelay>> HeartbeatRelay::StartWithSenders(
    HeartbeatRelayOptions options, NodeCallSenders senders) {
  auto impl = std::make_unique<Impl>(std::move(options), std::move(senders));
  if (absl::Status st = impl->Start(); !st.ok()) return st;
  return std::unique_ptr<HeartbeatRelay>(new HeartbeatRelay(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<HeartbeatRelay>> HeartbeatRelay::StartWithSender(
    HeartbeatRelayOptions options, NodeBeatSender sender) {
  NodeCallSenders senders;
  senders.beat = std::move(sender);
  return StartWithSenders(std::move(options), std::move(senders));
}

absl::StatusOr<std::unique_ptr<HeartbeatRelay>> HeartbeatRelay::Start(
    HeartbeatRelayOptions options) {
  NodeCallSenders senders = CoordinatorSenders(options.connect);
  return StartWithSenders(std::move(options), std::move(senders));
}

absl::StatusOr<int> HeartbeatRelay::AddWorker() { return impl_->AddWorker(); }
int64_t HeartbeatRelay::calls() const { return impl_->calls(); }
int64_t HeartbeatRelay::beats() const { return impl_->beats(); }
int64_t HeartbeatRelay::node_calls() const { return impl_->node_calls(); }
int64_t HeartbeatRelay::node_requests() const { return impl_->node_requests(); }
int64_t HeartbeatRelay::unary_calls() const { return impl_->unary_calls(); }

}  // namespace ddp
