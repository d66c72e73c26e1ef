// Per-node control traffic (proto/coordinator.proto, NODE HEARTBEATS and NODE CALLS): a node's
// ddp-trainer task relays its workers' heartbeats, so the coordinator gets about one RPC per node
// per interval instead of one per worker, and carries their Register, Rejoin and GetShard as node
// calls, so that a start-up or a re-formation costs one call per node. Each worker gets its own
// SOCK_SEQPACKET socketpair (AddWorker): the worker end crosses exec
// (ConnectOptions::heartbeat_relay_fd), the other end stays here.
//
// Heartbeats: a relay thread collects the requests and sends them as one NodeHeartbeat when every
// worker has one waiting, when the oldest has waited `batch_window`, or at once when a worker
// waits on its beat (RelayedCall.now: it has just rejoined); at most one call is in flight, on a
// thread of its own (an unreachable coordinator holds no other call of the workers).
// Workers whose heartbeats were answered together send their next ones together, so after the
// first interval a node's workers beat in step.
//
// Register, Rejoin, GetShard: the requests of one kind go as one node call when every worker has
// a call waiting or in flight, or when the oldest has waited its window (`register_window`,
// `call_window`). The join calls wait
// in the coordinator for the whole world, so each node call runs on a thread of its own and
// several may be in flight at once (the survivors' NodeRejoin and the replacement's NodeRegister
// of one recovery); heartbeats go on meanwhile.
//
// Every other call of a worker (Hello, the c10d store, CommitCheckpoint, ReportDone) goes as it is,
// at once, on a thread of its own (a StoreGet may wait), so that the worker opens no connection
// of its own.
//
// Every worker gets the outcome its own call would have had: its reply, the coordinator's
// refusal of its request, or the node call's error (a lost coordinator is seen by every worker
// exactly as before).
//
// The coordinator connection opens on the first call (after the workers are forked, so no gRPC
// thread exists before them), through the dist_file, and follows a restarted coordinator as any
// worker channel does (client/rpc_channel.h). The relay's threads start with every signal blocked
// (the launcher takes its signals in its main thread).
//
// Thread safety: AddWorker and the counters are safe from any thread; the destructor cancels the
// node calls in flight, stops the threads and closes every socket.
#ifndef SLURM_DDP_CLIENT_HEARTBEAT_RELAY_H_
#define SLURM_DDP_CLIENT_HEARTBEAT_RELAY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"

namespace slurm_ddp::v1 {
class NodeHeartbeatRequest;  // proto/coordinator.proto; declared only, so that this header
class NodeHeartbeatReply;    // stays free of protobuf for the launcher that includes it
class NodeRegisterRequest;
class NodeRejoinRequest;
class NodeJoinReply;
class NodeGetShardRequest;
class NodeGetShardReply;
}  // namespace slurm_ddp::v1

namespace ddp {

struct HeartbeatRelayOptions {
  ConnectOptions connect;  // how to reach the coordinator (a dist_file; the worker role)
  int node_rank = 0;       // named in each call, for the coordinator's log
  // How long the first waiting heartbeat waits for the node's other workers.
  absl::Duration batch_window = absl::Milliseconds(100);
  // How long the first waiting Rejoin or GetShard waits for the node's other workers.
  absl::Duration call_window = absl::Milliseconds(20);
  // The same for Register. Longer: a registration completes only with the whole world's, so
  // waiting for the node's slower starters costs nothing (the last of them finds every other
  // worker's call out and goes at once), and a start-up is then one call per node.
  absl::Duration register_window = absl::Seconds(1);
};

// One node call (tests send it to a fake): fills the reply, or returns the call's error.
using NodeBeatSender = std::function<absl::Status(const slurm_ddp::v1::NodeHeartbeatRequest&,
                                                  slurm_ddp::v1::NodeHeartbeatReply*)>;

// Where the node calls go (tests send them to a fake). Each fills its reply or returns the call's
// error; `timeout` is the call's deadline. `cancel` ends the calls in flight (the relay is going
// away) and makes later ones fail; null when there is nothing to cancel.
struct NodeCallSenders {
  NodeBeatSender beat;
  std::function<absl::Status(const slurm_ddp::v1::NodeRegisterRequest&, absl::Duration timeout,
                             slurm_ddp::v1::NodeJoinReply*)>
      register_workers;
  std::function<absl::Status(const slurm_ddp::v1::NodeRejoinRequest&, absl::Duration timeout,
                             slurm_ddp::v1::NodeJoinReply*)>
      rejoin;
  std::function<absl::Status(const slurm_ddp::v1::NodeGetShardRequest&, absl::Duration timeout,
                             slurm_ddp::v1::NodeGetShardReply*)>
      get_shard;
  // A worker's own call (RelayedUnary): `method`, its serialized request; fills the serialized
  // reply.
  std::function<absl::Status(const std::string& method, const std::string& request,
                             absl::Duration timeout, std::string* reply)>
      unary;
  std::function<void()> cancel;
};

class HeartbeatRelay {
 public:
  static absl::StatusOr<std::unique_ptr<HeartbeatRelay>> Start(HeartbeatRelayOptions options);
  // Sends through `senders` instead of a coordinator connection.
  static absl::StatusOr<std::unique_ptr<HeartbeatRelay>> StartWithSenders(
      HeartbeatRelayOptions options, NodeCallSenders senders);
  // Heartbeats only: the other calls fail UNIMPLEMENTED.
  static absl::StatusOr<std::unique_ptr<HeartbeatRelay>> StartWithSender(
      HeartbeatRelayOptions options, NodeBeatSender sender);
  ~HeartbeatRelay();
  HeartbeatRelay(const HeartbeatRelay&) = delete;
  HeartbeatRelay& operator=(const HeartbeatRelay&) = delete;

  // A socket for one worker (one local rank: the same socket serves a respawned worker). Returns
  // the worker's end, close-on-exec and owned by the relay: the spawn passes it to its child
  // (SpawnOptions::inherit_fds).
  absl::StatusOr<int> AddWorker();

  // NodeHeartbeat calls made and heartbeats relayed so far.
  int64_t calls() const;
  int64_t beats() const;
  // NodeRegister, NodeRejoin and NodeGetShard calls made, and the requests they carried.
  int64_t node_calls() const;
  int64_t node_requests() const;
  // The workers' own calls made for them (Hello, the store, CommitCheckpoint, ReportDone).
  int64_t unary_calls() const;

  class Impl;

 private:
  explicit HeartbeatRelay(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddp

#endif  // SLURM_DDP_CLIENT_HEARTBEAT_RELAY_H_
