#include "bench/loadgen/grpc_ranks.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/loadgen/bench_credentials.h"
#include "bench/loadgen/grpc_ranks_parts.h"
#include "bench/loadgen/host_limits.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/transport_args.h"

namespace ddp::bench {
namespace {

void SleepUntilNs(int64_t at_ns) {
  const int64_t left = at_ns - MonotonicNanos();
  if (left > 0) absl::SleepFor(absl::Nanoseconds(left));
}

}  // namespace

std::shared_ptr<grpc::Channel> OwnChannel(const std::string& address, const std::string& cert,
                                          int id) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("ddp.bench.channel", id);
  SetWorkerChannelArgs(&args);
  return grpc::CreateCustomChannel(address, BenchChannelCredentials(cert, &args), args);
}

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
        pb::RegisterRequest* w = c.register_req.add_workers();
        *w = r->register_req;
        if (!options_.separate_shard_call) *w->mutable_first_shard() = r->shard_req;
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
          phase->Ranked();
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

std::unique_ptr<grpc::ClientContext> GrpcRanks::Fresh() const {
  auto c = std::make_unique<grpc::ClientContext>();
  c->AddMetadata("authorization", "Bearer " + options_.token);
  c->set_deadline(DeadlineIn(options_.phase_timeout));
  return c;
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
