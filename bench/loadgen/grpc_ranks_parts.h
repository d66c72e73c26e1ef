// Internal to bench/loadgen: the state behind GrpcRanks (grpc_ranks.h), shared by its two
// files: grpc_ranks.cc (channels, connect, rendezvous, heartbeats) and grpc_ranks_reform.cc (the
// re-formation after a lost rank, per rank and per node). Thread safety as grpc_ranks.h says.
#ifndef SLURM_DDP_BENCH_LOADGEN_GRPC_RANKS_PARTS_H_
#define SLURM_DDP_BENCH_LOADGEN_GRPC_RANKS_PARTS_H_

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/loadgen/grpc_ranks.h"
#include "bench/loadgen/host_limits.h"
#include "proto/coordinator.grpc.pb.h"

namespace ddp::bench {

namespace pb = ::slurm_ddp::v1;

inline constexpr int kFakePidBase =
    1000000;  // simulated ranks need distinct (host, pid) identities

inline std::chrono::system_clock::time_point DeadlineIn(absl::Duration d) {
  return std::chrono::system_clock::now() + absl::ToChronoNanoseconds(d);
}

// A channel of its own with a subchannel pool of its own: one TCP connection, opened by its
// first call. Transport settings as the workers' client sets them (proto/transport_args.h).
std::shared_ptr<grpc::Channel> OwnChannel(const std::string& address, const std::string& cert,
                                          int id);

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
  // A rank (or a node's ranks) now holds its rank; its shard may still be on its way.
  void Ranked() {
    const int64_t now = MonotonicNanos();
    absl::MutexLock lock(&mu_);
    ranked_ns_ = std::max(ranked_ns_, now);
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
    r.ranked_ns = ranked_ns_;
    r.failed = failed_ + remaining_;
    r.latency = Summarize(&ms_);
    r.first_error = first_error_;
    return r;
  }

  absl::Mutex mu_;
  int remaining_ ABSL_GUARDED_BY(mu_);
  int failed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_ns_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t ranked_ns_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<double> ms_ ABSL_GUARDED_BY(mu_);
  std::string first_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp::bench

#endif  // SLURM_DDP_BENCH_LOADGEN_GRPC_RANKS_PARTS_H_
