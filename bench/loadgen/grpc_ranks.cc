#include "bench/loadgen/grpc_ranks.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/loadgen/bench_credentials.h"
#include "bench/loadgen/host_limits.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/transport_args.h"

namespace pb = ::slurm_ddp::v1;

namespace ddp::bench {
namespace {

constexpr int kFakePidBase = 1000000;  // simulated ranks need distinct (host, pid) identities

void SleepUntilNs(int64_t at_ns) {
  const int64_t left = at_ns - MonotonicNanos();
  if (left > 0) absl::SleepFor(absl::Nanoseconds(left));
}

std::chrono::system_clock::time_point DeadlineIn(absl::Duration d) {
  return std::chrono::system_clock::now() + absl::ToChronoNanoseconds(d);
}

}  // namespace

struct GrpcRanks::Rank {
  int global = 0;             // index among all simulated ranks, 0..world-1
  std::atomic<int> pid{0};    // a new one for a replacement (Reform)
  std::atomic<int> rank{-1};  // assigned by Register; then the rank heartbeats
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::Coordinator::Stub> stub;
  // The calls of the phase in progress; made before any call of the phase is issued.
  std::unique_ptr<grpc::ClientContext> ctx;        // Hello, then Register
  std::unique_ptr<grpc::ClientContext> shard_ctx;  // GetShard
  int64_t issued_ns = 0;
  pb::HelloRequest hello_req;
  pb::HelloReply hello_reply;
  pb::RegisterRequest register_req;
  pb::RegisterReply register_reply;
  pb::GetShardRequest shard_req;
  pb::GetShardReply shard_reply;
  std::atomic<bool> beating{false};  // a heartbeat is in flight
  std::atomic<bool> aborted{false};
  std::atomic<int64_t> interval_ms{0};  // the coordinator's heartbeat interval (Register)
  // Reform: the loss report, the survivor's Rejoin or the replacement's Register (rejoin_ctx),
  // and the replacement's own connection (a new process), made in the chain of its calls.
  int64_t left_generation = 0;
  std::unique_ptr<grpc::ClientContext> lost_ctx;
  std::unique_ptr<grpc::ClientContext> rejoin_ctx;
  pb::ReportLostRequest lost_req;
  pb::ReportLostReply lost_reply;
  pb::RejoinRequest rejoin_req;
  std::shared_ptr<grpc::Channel> replacement_channel;
  std::unique_ptr<pb::Coordinator::Stub> replacement_stub;
  pb::Coordinator::Stub* calls() const {
    return replacement_stub != nullptr ? replacement_stub.get() : stub.get();
  }
};

// A simulated node task: the node's ranks in this process and the task's own connection.
struct GrpcRanks::NodeCallSet {
  std::unique_ptr<grpc::ClientContext> join_ctx;
  std::unique_ptr<grpc::ClientContext> shard_ctx;
  pb::NodeRegisterRequest register_req;
  pb::NodeRejoinRequest rejoin_req;
  pb::NodeJoinReply join_reply;
  pb::NodeGetShardRequest shard_req;
  pb::NodeGetShardReply shard_reply;
  std::vector<Rank*> ranks;   // in request order
  std::vector<Rank*> joined;  // in shard_req order
};

struct GrpcRanks::Node {
  int first_global = 0;
  std::vector<Rank*> ranks;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::Coordinator::Stub> stub;
  std::atomic<bool> beating{false};
  std::unique_ptr<grpc::ClientContext> ctx;  // Hello
  int64_t issued_ns = 0;
  pb::HelloRequest hello_req;
  pb::HelloReply hello_reply;
  // node_calls: the node's NodeRegister or NodeRejoin, then its NodeGetShard; and in a Reform,
  // the lost rank's ReportLost and its replacement's own NodeRegister and NodeGetShard.
  NodeCallSet survivors;
  NodeCallSet replacement;
  std::unique_ptr<grpc::ClientContext> lost_ctx;
};

struct GrpcRanks::NodeCall {
  grpc::ClientContext ctx;
  pb::NodeHeartbeatRequest req;
  pb::NodeHeartbeatReply reply;
  Node* node = nullptr;
  std::vector<Rank*> ranks;  // in req.beats order
  std::vector<int> pids;     // the process each beat came from
  int64_t issued_ns = 0;
};

struct GrpcRanks::Call {
  grpc::ClientContext ctx;
  pb::HeartbeatRequest req;
  pb::HeartbeatReply reply;
  Rank* rank = nullptr;
  int pid = 0;
  int64_t issued_ns = 0;
};

// Counts one phase's completions, one per rank.
class GrpcRanks::Phase {
 public:
  explicit Phase(int calls) : remaining_(calls) {}

  void Done(int64_t issued_ns, const grpc::Status& s, const char* what) {
    const int64_t now = MonotonicNanos();
    absl::MutexLock lock(&mu_);
    if (s.ok()) {
      ms_.push_back(static_cast<double>(now - issued_ns) / 1e6);
    } else {
      ++failed_;
      if (first_error_.empty()) {
        first_error_ = absl::StrCat(what, ": ", s.error_code(), " ", s.error_message());
      }
    }
    last_ns_ = std::max(last_ns_, now);
    --remaining_;
  }

  // Waits for every call; past `deadline`, cancels the contexts and waits for the callbacks
  // (they come back CANCELLED at once), so no callback outlives the calls' storage.
  PhaseReport Finish(absl::Time deadline, std::vector<std::unique_ptr<Rank>>* ranks,
                     std::vector<std::unique_ptr<Node>>* nodes) {
    auto all_done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return remaining_ == 0; };
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithDeadline(absl::Condition(&all_done), deadline)) return ReportLocked();
    }
    for (auto& r : *ranks) {
      for (grpc::ClientContext* c :
           {r->ctx.get(), r->shard_ctx.get(), r->lost_ctx.get(), r->rejoin_ctx.get()}) {
        if (c != nullptr) c->TryCancel();
      }
    }
    for (auto& n : *nodes) {
      for (grpc::ClientContext* c : {n->ctx.get(), n->lost_ctx.get(), n->survivors.join_ctx.get(),
                                     n->survivors.shard_ctx.get(), n->replacement.join_ctx.get(),
                                     n->replacement.shard_ctx.get()}) {
        if (c != nullptr) c->TryCancel();
      }
    }
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&all_done), absl::Seconds(30));
    PhaseReport report = ReportLocked();
    if (report.first_error.empty()) report.first_error = "phase timed out";
    return report;
  }

 private:
  PhaseReport ReportLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    PhaseReport r;
    r.done_ns = last_ns_;
    r.failed = failed_ + remaining_;
    r.latency = Summarize(&ms_);
    r.first_error = first_error_;
    return r;
  }

  absl::Mutex mu_;
  int remaining_ ABSL_GUARDED_BY(mu_);
  int failed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_ns_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<double> ms_ ABSL_GUARDED_BY(mu_);
  std::string first_error_ ABSL_GUARDED_BY(mu_);
};

namespace {

// A channel of its own with a subchannel pool of its own: one TCP connection, opened by its
// first call. Transport settings as the workers' client sets them (proto/transport_args.h).
std::shared_ptr<grpc::Channel> OwnChannel(const std::string& address, const std::string& cert,
                                          int id) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("ddp.bench.channel", id);
  SetWorkerChannelArgs(&args);
  return grpc::CreateCustomChannel(address, BenchChannelCredentials(cert, &args), args);
}

}  // namespace

namespace {

// A node task that carries its ranks' calls carries their heartbeats too.
GrpcRanksOptions Normalized(GrpcRanksOptions o) {
  if (o.node_calls) o.node_heartbeats = true;
  return o;
}

}  // namespace

GrpcRanks::GrpcRanks(GrpcRanksOptions options) : options_(Normalized(std::move(options))) {
  const int per_node = options_.world % options_.per_node == 0 ? options_.per_node : 1;
  for (int i = 0; i < options_.count; ++i) {
    auto r = std::make_unique<Rank>();
    r->global = options_.first + i;
    r->pid = kFakePidBase + r->global;
    if (!options_.node_calls) {  // node_calls: its node task's connection carries its calls
      r->channel = OwnChannel(options_.address, options_.tls_cert, r->global);
      r->stub = pb::Coordinator::NewStub(r->channel);
    }
    if (options_.node_heartbeats &&
        (nodes_.empty() || r->global / per_node != nodes_.back()->first_global / per_node)) {
      auto n = std::make_unique<Node>();
      n->first_global = r->global;
      n->channel =
          OwnChannel(options_.address, options_.tls_cert, options_.world + r->global / per_node);
      n->stub = pb::Coordinator::NewStub(n->channel);
      nodes_.push_back(std::move(n));
    }
    if (options_.node_heartbeats) nodes_.back()->ranks.push_back(r.get());
    ranks_.push_back(std::move(r));
  }
}

GrpcRanks::~GrpcRanks() { StopHeartbeats(); }

PhaseReport GrpcRanks::Connect() {
  const std::string auth = "Bearer " + options_.token;
  // The node tasks' connections too (node_heartbeats): a node's task is connected before its
  // workers heartbeat through it.
  auto phase = std::make_shared<Phase>((options_.node_calls ? 0 : options_.count) +
                                       static_cast<int>(nodes_.size()));
  for (auto& n : nodes_) {
    n->issued_ns = MonotonicNanos();
    n->ctx = std::make_unique<grpc::ClientContext>();
    n->ctx->AddMetadata("authorization", auth);
    n->ctx->set_deadline(DeadlineIn(options_.phase_timeout));
    n->ctx->set_wait_for_ready(true);
    n->hello_req.set_nonce(options_.nonce);
    Node* raw = n.get();
    raw->stub->async()->Hello(
        raw->ctx.get(), &raw->hello_req, &raw->hello_reply,
        [raw, phase](grpc::Status s) { phase->Done(raw->issued_ns, s, "Hello (node)"); });
  }
  for (auto& r : ranks_) {
    if (options_.node_calls) break;
    r->issued_ns = MonotonicNanos();
    r->ctx = std::make_unique<grpc::ClientContext>();
    r->ctx->AddMetadata("authorization", auth);
    r->ctx->set_deadline(DeadlineIn(options_.phase_timeout));
    r->ctx->set_wait_for_ready(true);  // wait out connection back-off rather than fail
    r->hello_req.set_nonce(options_.nonce);
    Rank* raw = r.get();
    raw->stub->async()->Hello(
        raw->ctx.get(), &raw->hello_req, &raw->hello_reply,
        [raw, phase](grpc::Status s) { phase->Done(raw->issued_ns, s, "Hello"); });
  }
  return phase->Finish(absl::Now() + options_.phase_timeout + absl::Seconds(5), &ranks_, &nodes_);
}

PhaseReport GrpcRanks::Rendezvous() {
  const std::string auth = "Bearer " + options_.token;
  const int per_node = options_.world % options_.per_node == 0 ? options_.per_node : 1;
  for (auto& r : ranks_) {
    r->register_req.set_host(absl::StrCat("node", r->global / per_node));
    r->register_req.set_node_rank(r->global / per_node);
    r->register_req.set_local_rank(r->global % per_node);
    r->register_req.set_local_world_size(per_node);
    r->register_req.set_pid(r->pid);
    r->register_req.set_nonce(options_.nonce);
    r->shard_req.mutable_worker()->set_pid(r->pid);
    r->shard_req.set_epoch(0);
    r->shard_req.set_dataset_size(1281167);  // ImageNet-1k
    r->shard_req.set_seed(0);
    r->shard_req.set_shuffle(true);
    r->ctx = std::make_unique<grpc::ClientContext>();
    r->ctx->AddMetadata("authorization", auth);
    r->ctx->set_deadline(DeadlineIn(options_.phase_timeout));
    r->shard_ctx = std::make_unique<grpc::ClientContext>();
    r->shard_ctx->AddMetadata("authorization", auth);
    r->shard_ctx->set_deadline(DeadlineIn(options_.phase_timeout));
  }
  // A worker starts heartbeating as soon as Register gives it its rank (the coordinator's
  // liveness clock starts when the world is complete), so heartbeats overlap the GetShard calls.
  StartHeartbeats();
  auto phase = std::make_shared<Phase>(options_.count);
  if (options_.node_calls) {
    for (auto& n : nodes_) {
      NodeCallSet& c = n->survivors;
      c = NodeCallSet();
      c.join_ctx = Fresh();
      c.shard_ctx = Fresh();
      c.register_req.set_node_rank(n->first_global / per_node);
      for (Rank* r : n->ranks) {
        r->left_generation = -1;  // it joins generation 0
        *c.register_req.add_workers() = r->register_req;
        c.ranks.push_back(r);
      }
    }
    for (auto& n : nodes_) {
      Node* node = n.get();
      node->issued_ns = MonotonicNanos();
      for (Rank* r : node->ranks) r->issued_ns = node->issued_ns;
      node->stub->async()->NodeRegister(
          node->survivors.join_ctx.get(), &node->survivors.register_req,
          &node->survivors.join_reply, [this, node, phase](grpc::Status s) {
            NodeJoined(node, &node->survivors, s, phase, "NodeRegister");
          });
    }
    return phase->Finish(absl::Now() + options_.phase_timeout + absl::Seconds(5), &ranks_, &nodes_);
  }
  for (auto& r : ranks_) {
    r->issued_ns = MonotonicNanos();
    Rank* raw = r.get();
    raw->stub->async()->Register(
        raw->ctx.get(), &raw->register_req, &raw->register_reply, [raw, phase](grpc::Status s) {
          if (!s.ok()) {
            phase->Done(raw->issued_ns, s, "Register");
            return;
          }
          raw->shard_req.mutable_worker()->set_rank(raw->register_reply.rank());
          raw->interval_ms = raw->register_reply.heartbeat_interval_ms();
          raw->rank = raw->register_reply.rank();  // from now on it heartbeats
          raw->stub->async()->GetShard(
              raw->shard_ctx.get(), &raw->shard_req, &raw->shard_reply,
              [raw, phase](grpc::Status s2) { phase->Done(raw->issued_ns, s2, "GetShard"); });
        });
  }
  return phase->Finish(absl::Now() + options_.phase_timeout + absl::Seconds(5), &ranks_, &nodes_);
}

PhaseReport GrpcRanks::Reform() {
  if (options_.lost_rank < 0 || options_.lost_rank >= options_.world) {
    PhaseReport refused;
    refused.failed = options_.count;
    refused.first_error = "reform needs --lost-rank inside the world";
    return refused;
  }
  const std::string auth = "Bearer " + options_.token;
  auto fresh = [&] {
    auto c = std::make_unique<grpc::ClientContext>();
    c->AddMetadata("authorization", auth);
    c->set_deadline(DeadlineIn(options_.phase_timeout));
    return c;
  };
  if (options_.node_calls) return ReformByNode();
  // Every context of the phase exists before its first call (Phase::Finish may cancel them).
  Rank* lost = nullptr;
  for (auto& r : ranks_) {
    r->left_generation = r->register_reply.membership_generation();
    r->ctx = fresh();
    r->ctx->set_wait_for_ready(true);  // the replacement's first call on its new connection
    r->lost_ctx = fresh();
    r->rejoin_ctx = fresh();
    r->shard_ctx = fresh();
    if (r->global == options_.lost_rank) lost = r.get();
  }
  auto phase = std::make_shared<Phase>(options_.count);
  // Its node task sees the death first (SIGCHLD); the survivors' collectives fail at once too.
  if (lost != nullptr) ReportLostAndReplace(lost, phase);
  for (auto& r : ranks_) {
    if (r.get() != lost) Rejoin(r.get(), phase);
  }
  return phase->Finish(absl::Now() + options_.phase_timeout + absl::Seconds(5), &ranks_, &nodes_);
}

void GrpcRanks::Rejoin(Rank* rank, const std::shared_ptr<Phase>& phase) {
  rank->rejoin_req.mutable_worker()->set_rank(rank->rank.load());
  rank->rejoin_req.mutable_worker()->set_pid(rank->pid.load());
  rank->rejoin_req.set_membership_generation(rank->left_generation);
  rank->rejoin_req.set_committed_step(1000);
  rank->rejoin_req.set_reason("allreduce: connection reset by peer (simulated)");
  rank->issued_ns = MonotonicNanos();
  rank->stub->async()->Rejoin(rank->rejoin_ctx.get(), &rank->rejoin_req, &rank->register_reply,
                              [this, rank, phase](grpc::Status s) {
                                if (!s.ok()) {
                                  phase->Done(rank->issued_ns, s, "Rejoin");
                                  return;
                                }
                                FetchShard(rank, phase, "Rejoin");
                              });
}

void GrpcRanks::ReportLost(Rank* rank, pb::Coordinator::Stub* stub, grpc::ClientContext* ctx,
                           const std::shared_ptr<Phase>& phase, std::function<void()> respawned) {
  const int per_node = options_.world % options_.per_node == 0 ? options_.per_node : 1;
  rank->rank = -1;  // the process is gone: it heartbeats no more
  rank->lost_req.set_node_rank(rank->global / per_node);
  rank->lost_req.set_local_rank(rank->global % per_node);
  rank->lost_req.set_pid(rank->pid.load());
  rank->lost_req.set_what("killed by signal 9");
  rank->lost_req.set_signal(9);
  rank->issued_ns = MonotonicNanos();
  stub->async()->ReportLost(
      ctx, &rank->lost_req, &rank->lost_reply,
      [this, rank, phase, respawned = std::move(respawned)](grpc::Status s) {
        if (s.ok() && rank->lost_reply.action() != pb::LOST_ACTION_RESPAWN) {
          s = grpc::Status(
              grpc::StatusCode::FAILED_PRECONDITION,
              absl::StrCat("the coordinator answered action ",
                           pb::LostAction_Name(rank->lost_reply.action()), ", not RESPAWN"));
        }
        if (!s.ok()) {
          phase->Done(rank->issued_ns, s, "ReportLost");
          return;
        }
        // The node task starts the replacement: a new process, a new pid.
        rank->pid = kFakePidBase + options_.world + rank->global;
        rank->register_req.set_pid(rank->pid.load());
        respawned();
      });
}

void GrpcRanks::ReportLostAndReplace(Rank* rank, const std::shared_ptr<Phase>& phase) {
  ReportLost(rank, rank->stub.get(), rank->lost_ctx.get(), phase, [this, rank, phase] {
    // The replacement has a connection of its own.
    rank->replacement_channel =
        OwnChannel(options_.address, options_.tls_cert, 2 * options_.world + rank->global);
    rank->replacement_stub = pb::Coordinator::NewStub(rank->replacement_channel);
    rank->replacement_stub->async()->Hello(
        rank->ctx.get(), &rank->hello_req, &rank->hello_reply,
        [this, rank, phase](grpc::Status hello) {
          if (!hello.ok()) {
            phase->Done(rank->issued_ns, hello, "Hello (replacement)");
            return;
          }
          rank->replacement_stub->async()->Register(
              rank->rejoin_ctx.get(), &rank->register_req, &rank->register_reply,
              [this, rank, phase](grpc::Status reg) {
                if (!reg.ok()) {
                  phase->Done(rank->issued_ns, reg, "Register (replacement)");
                  return;
                }
                FetchShard(rank, phase, "Register (replacement)");
              });
        });
  });
}

// A Rendezvous joins generation 0 (left_generation -1), a Reform the one after the one it left.
grpc::Status GrpcRanks::CheckJoined(const Rank& rank, const pb::RegisterReply& reply) {
  const int64_t joined = reply.membership_generation();
  if (joined == rank.left_generation + 1) return grpc::Status::OK;
  return grpc::Status(
      grpc::StatusCode::FAILED_PRECONDITION,
      absl::StrCat("joined membership generation ", joined, ", not ", rank.left_generation + 1));
}

void GrpcRanks::FetchShard(Rank* rank, const std::shared_ptr<Phase>& phase, const char* what) {
  if (const grpc::Status st = CheckJoined(*rank, rank->register_reply); !st.ok()) {
    phase->Done(rank->issued_ns, st, what);
    return;
  }
  rank->shard_req.mutable_worker()->set_rank(rank->register_reply.rank());
  rank->shard_req.mutable_worker()->set_pid(rank->pid.load());
  rank->interval_ms = rank->register_reply.heartbeat_interval_ms();
  rank->rank = rank->register_reply.rank();  // heartbeats again (a replacement: its first)
  rank->calls()->async()->GetShard(
      rank->shard_ctx.get(), &rank->shard_req, &rank->shard_reply,
      [rank, phase](grpc::Status s) { phase->Done(rank->issued_ns, s, "GetShard"); });
}

std::unique_ptr<grpc::ClientContext> GrpcRanks::Fresh() const {
  auto c = std::make_unique<grpc::ClientContext>();
  c->AddMetadata("authorization", "Bearer " + options_.token);
  c->set_deadline(DeadlineIn(options_.phase_timeout));
  return c;
}

PhaseReport GrpcRanks::ReformByNode() {
  const int per_node = options_.world % options_.per_node == 0 ? options_.per_node : 1;
  // Every context and request of the phase exists before its first call.
  Node* lost_node = nullptr;
  Rank* lost = nullptr;
  for (auto& n : nodes_) {
    n->survivors = NodeCallSet();
    n->replacement = NodeCallSet();
    n->lost_ctx = Fresh();
    for (NodeCallSet* c : {&n->survivors, &n->replacement}) {
      c->join_ctx = Fresh();
      c->shard_ctx = Fresh();
      c->register_req.set_node_rank(n->first_global / per_node);
      c->rejoin_req.set_node_rank(n->first_global / per_node);
    }
    for (Rank* r : n->ranks) {
      r->left_generation = r->register_reply.membership_generation();
      if (r->global == options_.lost_rank) {
        lost_node = n.get();
        lost = r;
        continue;
      }
      pb::RejoinRequest* q = n->survivors.rejoin_req.add_workers();
      q->mutable_worker()->set_rank(r->rank.load());
      q->mutable_worker()->set_pid(r->pid.load());
      q->set_membership_generation(r->left_generation);
      q->set_committed_step(1000);
      q->set_reason("allreduce: connection reset by peer (simulated)");
      n->survivors.ranks.push_back(r);
    }
  }
  auto phase = std::make_shared<Phase>(options_.count);
  if (lost != nullptr) {
    ReportLost(lost, lost_node->stub.get(), lost_node->lost_ctx.get(), phase,
               [this, lost_node, lost, phase] {
                 // The node task carries the replacement's Register on its connection.
                 NodeCallSet* c = &lost_node->replacement;
                 *c->register_req.add_workers() = lost->register_req;
                 c->ranks.push_back(lost);
                 lost_node->stub->async()->NodeRegister(
                     c->join_ctx.get(), &c->register_req, &c->join_reply,
                     [this, lost_node, c, phase](grpc::Status s2) {
                       NodeJoined(lost_node, c, s2, phase, "NodeRegister (replacement)");
                     });
               });
  }
  for (auto& n : nodes_) {
    Node* node = n.get();
    if (node->survivors.ranks.empty()) continue;
    const int64_t now = MonotonicNanos();
    for (Rank* r : node->survivors.ranks) r->issued_ns = now;
    node->stub->async()->NodeRejoin(node->survivors.join_ctx.get(), &node->survivors.rejoin_req,
                                    &node->survivors.join_reply,
                                    [this, node, phase](grpc::Status s) {
                                      NodeJoined(node, &node->survivors, s, phase, "NodeRejoin");
                                    });
  }
  return phase->Finish(absl::Now() + options_.phase_timeout + absl::Seconds(5), &ranks_, &nodes_);
}

void GrpcRanks::NodeJoined(Node* node, NodeCallSet* c, const grpc::Status& s,
                           const std::shared_ptr<Phase>& phase, const char* what) {
  const bool complete = s.ok() && c->join_reply.results_size() == static_cast<int>(c->ranks.size());
  for (size_t i = 0; i < c->ranks.size(); ++i) {
    Rank* r = c->ranks[i];
    if (!complete) {
      phase->Done(r->issued_ns,
                  s.ok() ? grpc::Status(grpc::StatusCode::INTERNAL, "results missing") : s, what);
      continue;
    }
    const pb::JoinResult& result = c->join_reply.results(static_cast<int>(i));
    if (result.code() != 0) {
      phase->Done(r->issued_ns,
                  grpc::Status(static_cast<grpc::StatusCode>(result.code()), result.error()), what);
      continue;
    }
    if (const grpc::Status st = CheckJoined(*r, result.reply()); !st.ok()) {
      phase->Done(r->issued_ns, st, what);
      continue;
    }
    r->register_reply = result.reply();
    r->interval_ms = result.reply().heartbeat_interval_ms();
    pb::GetShardRequest* q = c->shard_req.add_shards();
    *q = r->shard_req;
    q->mutable_worker()->set_rank(result.reply().rank());
    q->mutable_worker()->set_pid(r->pid.load());
    c->joined.push_back(r);
  }
  if (c->joined.empty()) return;
  for (Rank* r : c->joined) r->rank = r->register_reply.rank();  // heartbeats (again)
  c->shard_req.set_node_rank(c->register_req.node_rank());
  node->stub->async()->NodeGetShard(
      c->shard_ctx.get(), &c->shard_req, &c->shard_reply, [c, phase](grpc::Status s2) {
        for (size_t i = 0; i < c->joined.size(); ++i) {
          Rank* r = c->joined[i];
          grpc::Status one = s2;
          if (s2.ok() && static_cast<int>(i) >= c->shard_reply.results_size()) {
            one = grpc::Status(grpc::StatusCode::INTERNAL, "results missing");
          } else if (s2.ok() && c->shard_reply.results(static_cast<int>(i)).code() != 0) {
            const pb::ShardResult& res = c->shard_reply.results(static_cast<int>(i));
            one = grpc::Status(static_cast<grpc::StatusCode>(res.code()), res.error());
          }
          phase->Done(r->issued_ns, one, "NodeGetShard");
        }
      });
}

void GrpcRanks::StartHeartbeats() {
  if (beater_.joinable()) return;
  stop_ = false;
  train_start_ns_ = MonotonicNanos();
  beater_ = std::thread([this] { BeatLoop(); });
}

void GrpcRanks::BeatLoop() {
  int64_t round = MonotonicNanos();
  while (!stop_.load()) {
    // The coordinator's interval once Register told it (as a worker's reporter follows it).
    const int64_t told = ranks_.empty() ? 0 : ranks_.front()->interval_ms.load();
    const int64_t period =
        told > 0 ? told * 1000000 : absl::ToInt64Nanoseconds(options_.heartbeat_period);
    for (size_t j = 0; j < nodes_.size() && !stop_.load(); ++j) {
      Node* n = nodes_[j].get();
      if (j % 2 == 0) SleepUntilNs(round + period * n->first_global / options_.world);
      SendNodeHeartbeat(n, static_cast<double>(MonotonicNanos() - train_start_ns_) / 1e9);
    }
    for (size_t j = 0; j < ranks_.size() && !stop_.load() && nodes_.empty(); ++j) {
      Rank* r = ranks_[j].get();
      // Rank g's turn is g/world of the way through the period: the ranks of all processes
      // together spread evenly over it.
      if (j % 16 == 0) SleepUntilNs(round + period * r->global / options_.world);
      if (r->aborted.load() || r->rank.load() < 0) continue;
      SendHeartbeat(r, static_cast<double>(MonotonicNanos() - train_start_ns_) / 1e9);
    }
    round += period;
    if (MonotonicNanos() > round + period) round = MonotonicNanos();  // fell behind: no bursts
    while (!stop_.load() && MonotonicNanos() < round) {
      SleepUntilNs(std::min(round, MonotonicNanos() + 100000000));
    }
  }
}

namespace {

// A training worker's progress: every rank at the same step (DDP is synchronous).
void FillBeat(int rank, int pid, double elapsed_s, pb::HeartbeatRequest* req) {
  req->mutable_worker()->set_rank(rank);
  req->mutable_worker()->set_pid(pid);
  constexpr int64_t kStepsPerEpoch = 5000;
  const int64_t step = static_cast<int64_t>(elapsed_s * 5);
  pb::Progress* p = req->mutable_progress();
  p->set_phase(pb::PHASE_TRAINING);
  p->set_epochs(90);
  p->set_steps_per_epoch(kStepsPerEpoch);
  p->set_step(step);
  p->set_epoch(step / kStepsPerEpoch);
  p->set_loss(2.0 * std::exp(-elapsed_s / 600.0) + 0.1);
  p->set_samples_per_second(5 * 256);
  p->set_forward_ms(60);
  p->set_backward_ms(120);
  p->set_comm_wait_ms(8);
  p->set_optimizer_ms(5);
}

}  // namespace

void GrpcRanks::SendNodeHeartbeat(Node* node, double elapsed_s) {
  auto* call = new NodeCall();
  call->node = node;
  for (Rank* r : node->ranks) {
    const int rank = r->rank.load();
    if (r->aborted.load() || rank < 0) continue;
    const int pid = r->pid.load();
    FillBeat(rank, pid, elapsed_s, call->req.add_beats());
    call->ranks.push_back(r);
    call->pids.push_back(pid);
  }
  if (call->ranks.empty()) {
    delete call;
    return;
  }
  if (node->beating.exchange(true)) {
    absl::MutexLock lock(&mu_);
    beats_.late += static_cast<int64_t>(call->ranks.size());
    delete call;
    return;
  }
  call->req.set_node_rank(node->first_global / std::max(1, options_.per_node));
  call->ctx.AddMetadata("authorization", "Bearer " + options_.token);
  call->ctx.set_deadline(DeadlineIn(options_.rpc_timeout));
  {
    absl::MutexLock lock(&mu_);
    ++in_flight_;
  }
  call->issued_ns = MonotonicNanos();
  node->stub->async()->NodeHeartbeat(&call->ctx, &call->req, &call->reply,
                                     [this, call](grpc::Status s) { NodeHeartbeatDone(call, s); });
}

void GrpcRanks::NodeHeartbeatDone(NodeCall* call, const grpc::Status& s) {
  const double ms = static_cast<double>(MonotonicNanos() - call->issued_ns) / 1e6;
  absl::MutexLock lock(&mu_);
  --in_flight_;
  for (size_t i = 0; i < call->ranks.size(); ++i) {
    // A beat sent for a process that has since been lost (Reform) may be refused: not a failure.
    if (call->pids[i] != call->ranks[i]->pid.load() || call->ranks[i]->rank.load() < 0) continue;
    const bool has = s.ok() && static_cast<int>(i) < call->reply.replies_size();
    const pb::RankHeartbeatReply* r = has ? &call->reply.replies(static_cast<int>(i)) : nullptr;
    if (r == nullptr || r->code() != 0) {
      ++beats_.failed;
      if (beats_.first_error.empty()) {
        beats_.first_error = !s.ok()        ? absl::StrCat(s.error_code(), " ", s.error_message())
                             : r == nullptr ? std::string("NodeHeartbeat: missing reply")
                                            : absl::StrCat(r->code(), " ", r->error());
      }
      continue;
    }
    ++beats_.ok;
    if (r->reply().command() == pb::ABORT) {
      ++beats_.aborted;
      call->ranks[i]->aborted = true;
    }
    beat_ms_.push_back(ms);
  }
  call->node->beating = false;
  delete call;
}

void GrpcRanks::SendHeartbeat(Rank* rank, double elapsed_s) {
  if (rank->beating.exchange(true)) {
    absl::MutexLock lock(&mu_);
    ++beats_.late;
    return;
  }
  const int rank_now = rank->rank.load();
  if (rank_now < 0) {  // lost since the loop looked (Reform)
    rank->beating = false;
    return;
  }
  auto* call = new Call();
  call->rank = rank;
  call->pid = rank->pid.load();
  call->ctx.AddMetadata("authorization", "Bearer " + options_.token);
  call->ctx.set_deadline(DeadlineIn(options_.rpc_timeout));
  FillBeat(rank_now, call->pid, elapsed_s, &call->req);
  {
    absl::MutexLock lock(&mu_);
    ++in_flight_;
  }
  call->issued_ns = MonotonicNanos();
  rank->calls()->async()->Heartbeat(
      &call->ctx, &call->req, &call->reply, [this, call](grpc::Status s) {
        HeartbeatDone(call, s.ok(),
                      s.ok() ? "" : absl::StrCat(s.error_code(), " ", s.error_message()),
                      call->reply.command());
      });
}

void GrpcRanks::HeartbeatDone(Call* call, bool ok, const std::string& error, int command) {
  const double ms = static_cast<double>(MonotonicNanos() - call->issued_ns) / 1e6;
  Rank* rank = call->rank;
  // A beat sent for a process that has since been lost (Reform) may be refused: not a failure.
  const bool stale = call->pid != rank->pid.load() || rank->rank.load() < 0;
  delete call;
  if (stale) {
    rank->beating = false;
    absl::MutexLock lock(&mu_);
    --in_flight_;
    return;
  }
  if (ok && command == pb::ABORT) rank->aborted = true;
  rank->beating = false;
  absl::MutexLock lock(&mu_);
  --in_flight_;
  if (!ok) {
    ++beats_.failed;
    if (beats_.first_error.empty()) beats_.first_error = error;
    return;
  }
  ++beats_.ok;
  if (command == pb::ABORT) ++beats_.aborted;
  beat_ms_.push_back(ms);
}

HeartbeatReport GrpcRanks::Counts() {
  absl::MutexLock lock(&mu_);
  HeartbeatReport r = beats_;
  std::vector<double> copy = beat_ms_;
  r.latency = Summarize(&copy);
  return r;
}

HeartbeatReport GrpcRanks::StopHeartbeats() {
  stop_ = true;
  if (beater_.joinable()) beater_.join();
  {
    absl::MutexLock lock(&mu_);
    auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ == 0; };
    mu_.AwaitWithTimeout(absl::Condition(&drained), options_.rpc_timeout + absl::Seconds(2));
  }
  return Counts();
}

}  // namespace ddp::bench
