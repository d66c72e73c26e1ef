// GrpcRanks's re-formation after a lost rank (grpc_ranks.h, Reform): per rank (a Rejoin per
// survivor, the replacement's Hello and Register on a connection of its own, its GetShard) and per
// node (a NodeRejoin per node task, the replacement's NodeRegister and NodeGetShard). A survivor
// fetches its shard again only when its rank or the world size changed, as ddp-trainer's workers
// do (every rank does with reform_all_shards).
#include <grpcpp/grpcpp.h>

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/loadgen/grpc_ranks.h"
#include "bench/loadgen/grpc_ranks_parts.h"
#include "bench/loadgen/host_limits.h"
#include "proto/coordinator.grpc.pb.h"

namespace ddp::bench {

absl::Status GrpcRanks::PrepareReform() {
  if (options_.lost_rank < 0 || options_.lost_rank >= options_.world) {
    return absl::InvalidArgumentError("reform needs --lost-rank inside the world");
  }
  reform_lost_ = nullptr;
  reform_lost_node_ = nullptr;
  if (options_.node_calls) {
    PrepareReformByNode();
  } else {
    // Every context of the phase exists before its first call (Phase::Finish may cancel them).
    for (auto& r : ranks_) {
      r->left_generation = r->register_reply.membership_generation();
      r->ctx = Fresh();
      r->ctx->set_wait_for_ready(true);  // the replacement's first call on its new connection
      r->lost_ctx = Fresh();
      r->rejoin_ctx = Fresh();
      r->shard_ctx = Fresh();
      if (r->global == options_.lost_rank) reform_lost_ = r.get();
    }
  }
  reform_prepared_ = true;
  return absl::OkStatus();
}

PhaseReport GrpcRanks::Reform() {
  if (!reform_prepared_) {
    if (absl::Status st = PrepareReform(); !st.ok()) {
      PhaseReport refused;
      refused.failed = options_.count;
      refused.first_error = std::string(st.message());
      return refused;
    }
  }
  reform_prepared_ = false;
  if (options_.node_calls) return ReformByNode();
  Rank* lost = reform_lost_;
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
  rank->stub->async()->Rejoin(
      rank->rejoin_ctx.get(), &rank->rejoin_req, &rank->register_reply,
      [this, rank, phase](grpc::Status s) {
        if (!s.ok()) {
          phase->Done(rank->issued_ns, s, "Rejoin");
          return;
        }
        if (KeepsShard(rank->rejoin_req.worker().rank(), rank->register_reply)) {
          grpc::Status st = CheckJoined(*rank, rank->register_reply);
          rank->interval_ms = rank->register_reply.heartbeat_interval_ms();
          rank->rank = rank->register_reply.rank();
          phase->Done(rank->issued_ns, st, "Rejoin");
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

bool GrpcRanks::KeepsShard(int old_rank, const pb::RegisterReply& reply) const {
  return !options_.reform_all_shards && reply.rank() == old_rank &&
         reply.world_size() == options_.world;
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

void GrpcRanks::PrepareReformByNode() {
  const int per_node = options_.world % options_.per_node == 0 ? options_.per_node : 1;
  // Only the contexts a node can use: its survivors' join and shard calls, and on the lost rank's
  // node the loss report and the replacement's calls (a context costs microseconds to make, and
  // the setup of 2,048 nodes is not the coordinator's time).
  for (auto& n : nodes_) {
    n->survivors = NodeCallSet();
    n->replacement = NodeCallSet();
    n->lost_ctx = nullptr;
    bool holds_lost = false;
    bool has_survivors = false;
    for (Rank* r : n->ranks) (r->global == options_.lost_rank ? holds_lost : has_survivors) = true;
    for (NodeCallSet* c : {&n->survivors, &n->replacement}) {
      if (c == &n->survivors ? has_survivors : holds_lost) {
        c->join_ctx = Fresh();
        c->shard_ctx = Fresh();
      }
      c->register_req.set_node_rank(n->first_global / per_node);
      c->rejoin_req.set_node_rank(n->first_global / per_node);
    }
    if (holds_lost) n->lost_ctx = Fresh();
    for (Rank* r : n->ranks) {
      r->left_generation = r->register_reply.membership_generation();
      if (r->global == options_.lost_rank) {
        reform_lost_node_ = n.get();
        reform_lost_ = r;
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
}

PhaseReport GrpcRanks::ReformByNode() {
  Node* const lost_node = reform_lost_node_;
  Rank* const lost = reform_lost_;
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
  bool ranked = false;  // a rank of this call now holds its rank
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
    if (!ranked) phase->Ranked();  // marked before any Done of this call: ranked <= done
    ranked = true;
    if (c == &node->survivors && KeepsShard(r->rank.load(), result.reply())) {
      phase->Done(r->issued_ns, grpc::Status::OK, what);  // its shard is the one it holds
      continue;
    }
    if (result.reply().has_first_shard()) {  // the registration answered its GetShard
      const pb::ShardResult& shard = result.reply().first_shard();
      r->rank = result.reply().rank();  // heartbeats
      phase->Done(r->issued_ns,
                  shard.code() == 0
                      ? grpc::Status::OK
                      : grpc::Status(static_cast<grpc::StatusCode>(shard.code()), shard.error()),
                  what);
      continue;
    }
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

}  // namespace ddp::bench
