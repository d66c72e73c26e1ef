// Internal to client/: a worker's end of its node's heartbeat relay (client/heartbeat_relay.h).
// The worker's task made a SOCK_SEQPACKET socketpair for it and passed one end down across
// exec; RoundTrip sends one HeartbeatRequest as one packet and waits, with a deadline, for the
// reply that carries its pid and sequence number (an older reply, one its previous caller gave
// up on or one meant for a worker that held this local rank before, is dropped).
//
// Errors mirror a direct Heartbeat's: the reply's own code (the coordinator's verdict, or the
// node call's failure, e.g. UNAVAILABLE naming the coordinator); UNAVAILABLE when the task is
// gone (the socket closed); DEADLINE_EXCEEDED when no reply came in time.
//
// Thread safety: RoundTrip is serialized by an internal lock; the fd is owned (closed on
// destruction).
#ifndef SLURM_DDP_CLIENT_RELAY_LINK_H_
#define SLURM_DDP_CLIENT_RELAY_LINK_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/coordinator.pb.h"

namespace ddp {

// The largest packet either side sends (a heartbeat reply holds two texts of at most 4 KiB).
inline constexpr size_t kMaxRelayPacket = 64 * 1024;

class RelayLink {
 public:
  explicit RelayLink(int fd);
  ~RelayLink();
  RelayLink(const RelayLink&) = delete;
  RelayLink& operator=(const RelayLink&) = delete;

  // `now`: the relay sends this beat at once, without waiting for the node's other workers.
  absl::Status RoundTrip(const slurm_ddp::v1::HeartbeatRequest& beat, bool now,
                         absl::Duration timeout, slurm_ddp::v1::HeartbeatReply* reply);

 private:
  const int fd_;
  const int pid_;
  absl::Mutex mu_;
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<char> buf_ ABSL_GUARDED_BY(mu_);  // kMaxRelayPacket bytes
};

}  // namespace ddp

#endif  // SLURM_DDP_CLIENT_RELAY_LINK_H_
