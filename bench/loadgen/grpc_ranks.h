// The simulated ranks of one ddp-rankgen process: `count` ranks of a `world`-rank job, each with
// its own gRPC channel (its own TCP connection, as every real worker has), driven through the
// callback API by a few threads rather than one blocked thread per rank. The channels are made
// by the constructor; they connect on their first call. The phases mirror a worker's start:
// Connect (Hello, wait_for_ready: the TCP and HTTP/2 handshakes and one call), Rendezvous
// (Register, which answers once the whole world has joined, then GetShard), and heartbeats: one
// per rank per period carrying training progress, at most one in flight per rank (a worker's
// heartbeat is synchronous). As ddp-trainer's workers do, a rank starts heartbeating as soon as
// Register has given it its rank, so heartbeats overlap the GetShard calls; StartHeartbeats is
// then a no-op. Reform is in-job recovery after one loss: the lost rank's node task reports it
// (ReportLost), its replacement (a new process: a new pid and a new connection) registers, and
// every other rank rejoins the next membership generation at once, as a failed collective tells
// ddp-trainer's workers; the replacement then fetches its shard, and so does a survivor whose
// rank or world size changed (every rank with reform_all_shards).
//
// Thread safety: the phase methods are called from one thread, in order; Counts may be called
// while heartbeats run. Internal state is guarded by mu_ (callbacks run on gRPC's threads).
#ifndef SLURM_DDP_BENCH_LOADGEN_GRPC_RANKS_H_
#define SLURM_DDP_BENCH_LOADGEN_GRPC_RANKS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bench/loadgen/agent_line.h"
#include "bench/loadgen/quantiles.h"
#include "proto/coordinator.grpc.pb.h"

namespace grpc {
class ClientContext;
class Status;
}  // namespace grpc

namespace ddp::bench {

struct GrpcRanksOptions {
  std::string address;  // the coordinator, host:port
  std::string token;
  std::string nonce;
  std::string tls_cert;  // the job's certificate (PEM); empty: a plaintext bench coordinator
  int first = 0;         // global index of this process's first simulated rank
  int count = 0;
  int world = 0;
  int per_node = 8;  // simulated workers per node (host names and local ranks)
  // As ddp-trainer's node tasks do (--heartbeats node): the ranks of one node heartbeat
  // together, one NodeHeartbeat per node per period on the node task's own connection (one more
  // channel per node). false: every rank sends its own Heartbeat on its own connection.
  bool node_heartbeats = true;
  // NODE CALLS: each simulated node task carries its ranks' Register, GetShard, Rejoin (and
  // heartbeats) in one NodeRegister / NodeGetShard / NodeRejoin call per node on its own
  // connection; the ranks open no connection. false: one connection and one call per rank.
  bool node_calls = false;
  // node_calls: at start-up each rank's Register carries its first GetShard
  // (RegisterRequest.first_shard), as ddp-trainer's workers of a run that starts fresh send it,
  // and the node makes no NodeGetShard. true: the shards in a NodeGetShard of their own after
  // the NodeRegister (a run that resumes from a checkpoint). The re-formation's replacement
  // always asks in its own call (its epoch is the one in progress).
  bool separate_shard_call = false;
  absl::Duration heartbeat_period = absl::Seconds(1);
  absl::Duration rpc_timeout = absl::Seconds(10);  // ddp-trainer's workers use 10 s
  absl::Duration phase_timeout = absl::Seconds(120);
  int lost_rank = -1;  // Reform: the global rank that is lost (-1: Reform is refused)
  // Reform: which ranks fetch their shard after joining the new generation. false (as
  // ddp-trainer's workers do, which ask for a shard only at an epoch's start or as a new
  // process): the replacement, and a survivor only when its rank or the world size changed (else
  // its shard is the one it holds). true: every rank fetches its shard again.
  bool reform_all_shards = false;
};

struct HeartbeatReport {
  int64_t ok = 0;
  int64_t failed = 0;   // RPC errors (deadline, unavailable, ...)
  int64_t aborted = 0;  // ranks told to ABORT (the job failed)
  int64_t late = 0;     // turns skipped because the rank's previous heartbeat was still out
  Quantiles latency;    // per heartbeat, ms
  std::string first_error;
};

class GrpcRanks {
 public:
  explicit GrpcRanks(GrpcRanksOptions options);
  ~GrpcRanks();  // stops heartbeats; waits (bounded) for calls in flight
  GrpcRanks(const GrpcRanks&) = delete;
  GrpcRanks& operator=(const GrpcRanks&) = delete;

  PhaseReport Connect();
  PhaseReport Rendezvous();
  void StartHeartbeats();
  // After Rendezvous, with heartbeats running or not. The report's done_ns is when the last rank
  // of this process held its new rank and shard; a rank that joined any generation but the one
  // after the one it left counts as failed.
  PhaseReport Reform();
  // Makes the next Reform's contexts and requests ahead of it (optional: Reform does it first
  // otherwise), so that its time is the calls' alone. INVALID_ARGUMENT without a lost rank.
  absl::Status PrepareReform();
  HeartbeatReport Counts();
  HeartbeatReport StopHeartbeats();

 private:
  struct Rank;
  struct Node;
  struct NodeCallSet;
  struct Call;
  struct NodeCall;
  class Phase;

  void BeatLoop();
  void Rejoin(Rank* rank, const std::shared_ptr<Phase>& phase);
  std::unique_ptr<grpc::ClientContext> Fresh() const;  // token, phase deadline
  void PrepareReformByNode();
  PhaseReport ReformByNode();
  // A NodeRegister or NodeRejoin answered: each rank that joined fetches its shard in one
  // NodeGetShard of the node; each rank's outcome goes to `phase`.
  void NodeJoined(Node* node, NodeCallSet* calls, const grpc::Status& s,
                  const std::shared_ptr<Phase>& phase, const char* what);
  // The lost rank's node task reports it on `stub`; once the coordinator answers RESPAWN the
  // rank has the replacement's pid and `respawned` runs (on a gRPC thread).
  void ReportLost(Rank* rank, slurm_ddp::v1::Coordinator::Stub* stub, grpc::ClientContext* ctx,
                  const std::shared_ptr<Phase>& phase, std::function<void()> respawned);
  void ReportLostAndReplace(Rank* rank, const std::shared_ptr<Phase>& phase);
  void FetchShard(Rank* rank, const std::shared_ptr<Phase>& phase, const char* what);
  static grpc::Status CheckJoined(const Rank& rank, const slurm_ddp::v1::RegisterReply& reply);
  // A survivor that joined the new generation with `reply` keeps the shard it holds (its rank
  // and the world size are unchanged, and reform_all_shards is off).
  bool KeepsShard(int old_rank, const slurm_ddp::v1::RegisterReply& reply) const;
  void SendHeartbeat(Rank* rank, double elapsed_s);
  void SendNodeHeartbeat(Node* node, double elapsed_s);
  void HeartbeatDone(Call* call, bool ok, const std::string& error, int command);
  void NodeHeartbeatDone(NodeCall* call, const grpc::Status& s);

  const GrpcRanksOptions options_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::vector<std::unique_ptr<Node>> nodes_;  // node_heartbeats only
  // PrepareReform's: the lost rank (and its node) in this process, if any.
  bool reform_prepared_ = false;
  Rank* reform_lost_ = nullptr;
  Node* reform_lost_node_ = nullptr;
  std::thread beater_;
  std::atomic<bool> stop_{false};
  int64_t train_start_ns_ = 0;

  absl::Mutex mu_;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  HeartbeatReport beats_ ABSL_GUARDED_BY(mu_);
  std::vector<double> beat_ms_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp::bench

#endif  // SLURM_DDP_BENCH_LOADGEN_GRPC_RANKS_H_
