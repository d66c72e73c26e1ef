// Internal to client/: the one place that builds gRPC channels and runs calls with a deadline,
// the bearer token and jittered exponential backoff on UNAVAILABLE (at most kMaxBackoff between
// tries, so that a restarted coordinator is found quickly). Includes gRPC; never include it from
// a public client header.
//
// A coordinator that comes back (ddp-coordinator --resume-from-journal) listens on a new port and
// republishes the dist_file with the same job, generation, nonce and tokens and a higher
// incarnation. A channel opened from a dist_file re-reads it whenever a call finds the
// coordinator UNAVAILABLE; on a newer incarnation of the same job it moves to the new address,
// and the call (and every later one) goes there. Workers re-attach through their next heartbeat:
// the restored coordinator knows their ranks.
//
// A standby coordinator that takes the job over (trainer/launcher/standby.h) republishes the
// dist_file with the next `epoch`; the channel follows the newest (epoch, incarnation) the same
// way. Every reply carries its coordinator's epoch (the kEpochHeader initial metadata, none from
// epoch 0): a reply from an epoch older than the newest this channel has seen is never obeyed; the
// call is treated as UNAVAILABLE, so the dist_file is read again and the call retried there.
//
// A coordinator that stops answering without going away (its node stopped, suspended or hung:
// connections stay open, calls wait for their deadline) is not left to the deadline: while a call
// has been waiting longer than kFollowCheck, a watcher thread stats the dist_file every
// kFollowCheck; when it names a newer coordinator (a standby took over), the channel moves there
// and the waiting calls are cancelled and sent again to the new address, within the deadline they
// had. Without this, a takeover from a hung (not dead) node 0 left every worker heartbeating into
// the old connection while the new coordinator counted their silence.
//
// A call that finds the coordinator UNAVAILABLE while the job's result file (<dist_file>.result,
// this job and generation) exists returns at once: the job is over and no retry can be answered.
//
// Every channel is TLS and trusts one certificate: the job's (the dist_file's `tls_cert`, or with
// an address the token file's or ConnectOptions::tls_cert), checked under kTlsServerName
// (common/dist_file.h). A peer without the job's key fails the handshake before any call, its
// token included, is sent; there is no plaintext fallback. A restarted coordinator keeps the
// certificate; a newer incarnation with another one is not followed.
//
// Thread safety: Call and stub() are safe from any thread; the endpoint's job identity never
// changes after Open, its address may (address()).
#ifndef SLURM_DDP_CLIENT_RPC_CHANNEL_H_
#define SLURM_DDP_CLIENT_RPC_CHANNEL_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "common/dist_file.h"
#include "proto/coordinator.grpc.pb.h"

namespace ddp {

// Free text as it may cross the wire: invalid UTF-8 replaced (U+FFFD), then cut at a code point
// boundary to at most `max_bytes` (the coordinator's limit for reasons and messages is 4 KiB).
inline constexpr size_t kMaxWireTextBytes = 4096;
std::string WireText(absl::string_view text, size_t max_bytes = kMaxWireTextBytes);

// The initial metadata key that carries a coordinator's epoch on every reply.
inline constexpr char kEpochHeader[] = "ddp-epoch";

class RpcChannel {
 public:
  // Resolves `options` (reads + verifies the dist_file and takes the token of options.role, or
  // takes address + token or token file), opens a channel and calls Hello: confirms the
  // dist_file's nonce (none without a dist_file) and fills endpoint() with the job id,
  // generation and HTTP port the coordinator reports, and the view token when it tells one.
  static absl::StatusOr<std::unique_ptr<RpcChannel>> Open(const ConnectOptions& options);

  // Runs `call` until it returns something other than UNAVAILABLE or `timeout` passes. Each try
  // gets a fresh context carrying the token and the remaining deadline. Errors read
  // "<method>: <reason>" and, when the coordinator never answered (UNAVAILABLE, or the deadline
  // ran out after retries), are UNAVAILABLE naming its address.
  absl::Status Call(const char* method, absl::Duration timeout,
                    const std::function<grpc::Status(grpc::ClientContext*)>& call) const;

  static constexpr absl::Duration kMaxBackoff = absl::Seconds(1);
  // While backing off, or while a call waits for an answer, how often the dist_file is checked
  // for a newer coordinator.
  static constexpr absl::Duration kFollowCheck = absl::Milliseconds(100);

  ~RpcChannel();
  RpcChannel(const RpcChannel&) = delete;
  RpcChannel& operator=(const RpcChannel&) = delete;

  // The stub of the current incarnation (stubs of earlier ones stay valid).
  slurm_ddp::v1::Coordinator::Stub& stub() const;
  // Job identity and tokens as opened; grpc_address is the first incarnation's (see address()).
  const DistFileContents& endpoint() const { return endpoint_; }
  std::string address() const;
  int64_t incarnation() const;
  // The epoch of the coordinator the channel talks to now.
  int64_t epoch() const;
  // The token every call carries.
  const std::string& token() const { return token_; }
  absl::Duration rpc_timeout() const { return rpc_timeout_; }
  int world_size() const { return world_size_; }

 private:
  // A call waiting for its answer (Call), which the follow watcher may cancel.
  struct InFlight {
    grpc::ClientContext* ctx;
    absl::Time since;
    size_t stub_index;      // the stub current when it began
    bool followed = false;  // cancelled because the channel moved to a newer coordinator
  };

  RpcChannel() = default;
  void StartWatcher();
  // The watcher thread: see the file comment.
  void WatchLoop();
  // Blocks until a call has been in flight for kFollowCheck (true) or the channel closes (false).
  bool AwaitWaitingCall();
  void Track(InFlight* call) const;
  // Untracks `call`; true when the watcher cancelled it to send it again elsewhere.
  bool Untrack(InFlight* call) const;
  void Connect(const std::string& address) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Re-reads the dist_file; true when it names a newer incarnation of this job (now current).
  bool FollowRestart() const;
  // True when the reply in `ctx` came from an epoch older than the newest seen (and records a
  // newer one).
  bool StaleEpoch(const grpc::ClientContext& ctx) const;
  // How the job ended, from its result file (common/job_result.h) when that file is this job's
  // and generation's; nullopt while there is none, or without a dist_file.
  std::optional<std::string> JobEnded() const;

  DistFileContents endpoint_;  // address, tokens, nonce (nonce empty without a dist_file)
  std::string token_;
  absl::Duration rpc_timeout_;
  int world_size_ = 0;
  bool worker_ = true;     // a worker's channel (proto/transport_args.h), else an operator's
  std::string dist_file_;  // empty: opened by address
  DistFileExpectation expect_;
  mutable absl::Mutex mu_;
  mutable std::string address_ ABSL_GUARDED_BY(mu_);
  mutable int64_t incarnation_ ABSL_GUARDED_BY(mu_) = 0;
  mutable int64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;         // of the current address
  mutable int64_t newest_epoch_ ABSL_GUARDED_BY(mu_) = 0;  // in the dist_file or any reply
  // The last is current; earlier ones stay alive for calls still using them.
  mutable std::vector<std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
  mutable std::vector<std::unique_ptr<slurm_ddp::v1::Coordinator::Stub>> stubs_
      ABSL_GUARDED_BY(mu_);
  mutable absl::Mutex calls_mu_;  // never held with mu_
  mutable std::set<InFlight*> in_flight_ ABSL_GUARDED_BY(calls_mu_);
  bool stop_watching_ ABSL_GUARDED_BY(calls_mu_) = false;
  std::thread watcher_;  // with a dist_file only
};

}  // namespace ddp

#endif  // SLURM_DDP_CLIENT_RPC_CHANNEL_H_
