// Internal to client/: a worker's end of its node's relay (client/heartbeat_relay.h). The
// worker's task made a SOCK_SEQPACKET socketpair for it and passed one end down across exec.
// Each call sends one RelayedCall as one packet and waits, with a deadline, for the RelayedReply
// that carries its pid and sequence number. Several calls may wait at once (a heartbeat while a
// Rejoin waits for the new generation): whichever waiter reads a packet files it for its owner.
// A reply nobody waits for (one its caller gave up on, or one meant for a worker that held this
// local rank before) is dropped.
//
// Errors mirror a direct call's: the reply's own code (the coordinator's verdict, or the node
// call's failure, e.g. UNAVAILABLE naming the coordinator); UNAVAILABLE when the task is gone
// (the socket closed); DEADLINE_EXCEEDED when no reply came in time.
//
// Thread safety: every method is safe from any thread; the fd is owned (closed on destruction).
#ifndef SLURM_DDP_CLIENT_RELAY_LINK_H_
#define SLURM_DDP_CLIENT_RELAY_LINK_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/coordinator.pb.h"

namespace ddp {

// The largest packet either side sends (a heartbeat reply holds two texts of at most 4 KiB).
inline constexpr size_t kMaxRelayPacket = 64 * 1024;

class RelayLink {
 public:
  // `job_ended` (may be empty): true once the job has ended (its result file); a call the task
  // answers UNAVAILABLE is then not retried, since no retry can be answered.
  explicit RelayLink(int fd, std::function<bool()> job_ended = nullptr);
  ~RelayLink();
  RelayLink(const RelayLink&) = delete;
  RelayLink& operator=(const RelayLink&) = delete;

  // `now`: the relay sends this beat at once, without waiting for the node's other workers.
  absl::Status RoundTrip(const slurm_ddp::v1::HeartbeatRequest& beat, bool now,
                         absl::Duration timeout, slurm_ddp::v1::HeartbeatReply* reply);
  // The join and shard calls the task carries (NODE CALLS): `server_timeout` is the node call's
  // deadline, `timeout` how long this worker waits for the answer.
  absl::StatusOr<slurm_ddp::v1::RegisterReply> Register(const slurm_ddp::v1::RegisterRequest& req,
                                                        absl::Duration server_timeout,
                                                        absl::Duration timeout);
  absl::StatusOr<slurm_ddp::v1::RegisterReply> Rejoin(const slurm_ddp::v1::RejoinRequest& req,
                                                      absl::Duration server_timeout,
                                                      absl::Duration timeout);
  absl::StatusOr<slurm_ddp::v1::GetShardReply> GetShard(const slurm_ddp::v1::GetShardRequest& req,
                                                        absl::Duration server_timeout,
                                                        absl::Duration timeout);
  // Any other call the task makes for the worker as it is (RelayedUnary): `request` serialized;
  // returns the serialized reply.
  absl::StatusOr<std::string> Unary(const char* method, const std::string& request,
                                    absl::Duration server_timeout, absl::Duration timeout);

 private:
  // Sends `call` (pid and seq filled here) and waits for its reply.
  absl::Status Exchange(const char* method, slurm_ddp::v1::RelayedCall* call,
                        absl::Duration timeout, slurm_ddp::v1::RelayedReply* reply);
  // Runs `once(server_timeout_left, wait)` again while it answers UNAVAILABLE (a node call carries
  // one result per request, so the coordinator's "not now" for one request is not retried by the
  // task's channel, which retries only a whole call that went unanswered), with backoff, until
  // the deadline passes or the task is gone.
  absl::Status RetryUnavailable(
      const char* method, absl::Duration server_timeout, absl::Duration timeout,
      const std::function<absl::Status(absl::Duration, absl::Duration)>& once);
  bool closed();
  static constexpr absl::Duration kMaxRetryBackoff = absl::Seconds(1);

  absl::StatusOr<slurm_ddp::v1::RegisterReply> Join(const char* method,
                                                    slurm_ddp::v1::RelayedCall* call,
                                                    absl::Duration server_timeout,
                                                    absl::Duration timeout);

  const int fd_;
  const int pid_;
  const std::function<bool()> job_ended_;
  absl::Mutex send_mu_;  // one packet at a time on the socket
  absl::Mutex mu_;
  absl::CondVar cv_;  // a packet was filed, or the reader left
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<uint64_t> waiting_ ABSL_GUARDED_BY(mu_);  // calls sent and not yet answered
  std::map<uint64_t, slurm_ddp::v1::RelayedReply> arrived_ ABSL_GUARDED_BY(mu_);
  bool reading_ ABSL_GUARDED_BY(mu_) = false;  // one waiter reads the socket at a time
  bool closed_ ABSL_GUARDED_BY(mu_) = false;   // the task closed its end
  std::vector<char> buf_;                      // kMaxRelayPacket bytes; the reader's
};

}  // namespace ddp

#endif  // SLURM_DDP_CLIENT_RELAY_LINK_H_
