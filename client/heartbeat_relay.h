// Per-node heartbeat aggregation (proto/coordinator.proto, NODE HEARTBEATS): a node's
// ddp-trainer task relays its workers' heartbeats, so the coordinator gets about one RPC per node
// per interval instead of one per worker. Each worker gets its own SOCK_SEQPACKET socketpair
// (AddWorker): the worker end crosses exec (ConnectOptions::heartbeat_relay_fd), the other end
// stays here. A relay thread collects the requests and sends them as one NodeHeartbeat when every
// worker has one waiting, when the oldest has waited `batch_window`, or at once when a worker
// waits on its beat (RelayedHeartbeat.now: it has just rejoined); at most one call is in flight.
// Workers whose heartbeats were answered together send their next ones together, so after the first
// interval a node's workers beat in step. Every worker gets the outcome its own Heartbeat would
// have had: its reply, the coordinator's refusal of its beat, or the node call's error (a lost
// coordinator is seen by every worker exactly as before).
//
// The coordinator connection opens on the first batch (after the workers are forked, so no gRPC
// thread exists before them), through the dist_file, and is opened again after a failure.
// The relay thread starts with every signal blocked (the launcher takes its signals in its main
// thread).
//
// Thread safety: AddWorker and the counters are safe from any thread; the destructor stops the
// thread (a call in flight ends within its deadline) and closes every socket.
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
}  // namespace slurm_ddp::v1

namespace ddp {

struct HeartbeatRelayOptions {
  ConnectOptions connect;  // how to reach the coordinator (a dist_file; the worker role)
  int node_rank = 0;       // named in each call, for the coordinator's log
  // How long the first waiting heartbeat waits for the node's other workers.
  absl::Duration batch_window = absl::Milliseconds(100);
};

// One node call (tests send it to a fake): fills the reply, or returns the call's error.
using NodeBeatSender = std::function<absl::Status(const slurm_ddp::v1::NodeHeartbeatRequest&,
                                                  slurm_ddp::v1::NodeHeartbeatReply*)>;

class HeartbeatRelay {
 public:
  static absl::StatusOr<std::unique_ptr<HeartbeatRelay>> Start(HeartbeatRelayOptions options);
  // Sends through `sender` instead of a coordinator connection.
  static absl::StatusOr<std::unique_ptr<HeartbeatRelay>> StartWithSender(
      HeartbeatRelayOptions options, NodeBeatSender sender);
  ~HeartbeatRelay();
  HeartbeatRelay(const HeartbeatRelay&) = delete;
  HeartbeatRelay& operator=(const HeartbeatRelay&) = delete;

  // A socket for one worker (one local rank: the same socket serves a respawned worker). Returns
  // the worker's end, close-on-exec and owned by the relay: the spawn passes it to its child
  // (SpawnOptions::inherit_fds).
  absl::StatusOr<int> AddWorker();

  // Node calls made and heartbeats relayed so far.
  int64_t calls() const;
  int64_t beats() const;

  class Impl;

 private:
  explicit HeartbeatRelay(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddp

#endif  // SLURM_DDP_CLIENT_HEARTBEAT_RELAY_H_
