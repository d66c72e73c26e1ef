// The coordinator's gRPC server: owns the grpc::Server (TLS only, health checking on, reflection
// off unless asked for), the
// service, the token check by role and the call gate (auth.h, call_gate.h), the refusal log, the
// status snapshots (StatusCache), the chart history, the RPC metrics, and a ticker thread that
// drives Job::Tick (liveness, registration deadline), KvStore::ExpireWaiters, the call gate's
// first-message deadlines, snapshot refresh,
// history sampling, status watchers and the refusal log's summaries. Job and KvStore are owned
// by the caller. The HTTP endpoint (coordinator/ops/http_endpoint.h) is started beside this
// server on its status_cache(), history(), metrics() and authenticator().
//
// Untrusted bytes cost little: a call is refused on its headers, before its body is read
// (unary_call.h); requests are bounded (kMaxRequestBytes, and per method); so are the calls in
// flight (by role: call_gate.h), the HTTP/2 streams per connection, the header size, and the
// memory gRPC's transport may hold (a grpc::ResourceQuota).
//
// TLS: the server speaks only TLS, with the job's key and self-signed certificate
// (coordinator/rpc/tls_identity.h); clients trust that certificate alone, so a process that takes
// over the port of a dead coordinator cannot complete a handshake with them. A plaintext client
// never gets past the handshake.
//
// Reflection (grpc.reflection.v1alpha) is off unless ServerOptions::reflection, and meant for
// debugging only: in gRPC 1.51 it is a synchronous service added by a plugin, so its calls reach
// neither the token check nor the call gate (both act on the headers of the methods this server
// registers itself, unary_call.h), and gRPC offers no hook before a synchronous handler but an
// AuthMetadataProcessor, which would run on every call of the job. Each open reflection stream
// holds a thread; with reflection on, the synchronous threads are capped (kReflectionThreads), and
// gRPC refuses streams beyond the cap (RESOURCE_EXHAUSTED) instead of growing the process. Off
// means off: linking gRPC's reflection library registers it for every server, so the builder
// takes it out again (tests/coordinator/rpc/reflection_test.py).
//
// Thread safety: Start/Shutdown/destructor from one owning thread; port() and address() anywhere.
#ifndef SLURM_DDP_COORDINATOR_RPC_SERVER_H_
#define SLURM_DDP_COORDINATOR_RPC_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "coordinator/clock.h"
#include "coordinator/job/job.h"
#include "coordinator/kv_store.h"
#include "coordinator/ops/history.h"
#include "coordinator/ops/rpc_metrics.h"
#include "coordinator/ops/status_cache.h"
#include "coordinator/rpc/auth.h"
#include "coordinator/rpc/call_gate.h"
#include "coordinator/rpc/refusal_log.h"
#include "coordinator/rpc/tls_identity.h"

namespace grpc {
class Server;
}

namespace ddp {

class CoordinatorService;
class AsyncQueues;

struct ServerOptions {
  std::string listen = "127.0.0.1:0";  // host:port; port 0 picks a free port
  RoleTokens tokens;                   // the worker, view and control tokens (all required)
  // The key and certificate the server presents; empty: a fresh one (tls_cert() tells clients).
  TlsIdentity tls;
  // gRPC server reflection, for debugging (see above); off by default.
  bool reflection = false;
  // No TLS: for bench/loadgen.sh --plaintext only (the cost of TLS, compared in one run). No
  // client of the product talks to such a server: it publishes no certificate.
  bool plaintext = false;
  absl::Duration tick = absl::Milliseconds(50);
  // Status snapshots are rebuilt at most this often (readers see progress at most this old).
  absl::Duration status_max_age = absl::Milliseconds(200);
  // Chart history: finest sample spacing and the number of samples kept.
  absl::Duration history_interval = absl::Seconds(1);
  size_t history_capacity = 720;
  std::function<void(const std::string&)> log;  // refused calls etc. (may be empty)
  // Refused calls are summarized in the log at most this often.
  absl::Duration refusal_log_interval = absl::Seconds(1);
  // Calls in flight by role, parked ones included (call_gate.h); worker_calls 0: 16 per rank of
  // the job plus 1024.
  CallBudgets budgets;
  int max_streams_per_connection = 100;
  int max_header_bytes = 16 * 1024;
  // Memory gRPC's transport may hold (read buffers, queued frames), a soft bound; 64 KiB per
  // rank of the job are added to it (every rank holds a connection).
  size_t memory_quota_bytes = size_t{128} << 20;
  // The coordinator's epoch, on every reply (epoch_interceptor.h), and the check every call
  // passes first (CallGate::SetFence; empty: none).
  int64_t epoch = 0;
  std::function<absl::Status()> fence;
};

class CoordinatorServer {
 public:
  // `job`, `store` and `clock` must outlive the server.
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(const ServerOptions& options,
                                                                  Job* job, KvStore* store,
                                                                  const Clock* clock);
  ~CoordinatorServer();
  CoordinatorServer(const CoordinatorServer&) = delete;
  CoordinatorServer& operator=(const CoordinatorServer&) = delete;

  // Threads gRPC may run synchronous handlers on (reflection) when reflection is on.
  static constexpr int kReflectionThreads = 8;

  int port() const { return port_; }
  // The certificate clients must trust (PEM).
  const std::string& tls_cert() const { return tls_cert_; }
  // host:port as clients should dial it.
  const std::string& address() const { return address_; }
  Job& job() { return *job_; }
  StatusCache& status_cache() { return *cache_; }
  History& history() { return *history_; }
  RpcMetrics& metrics() { return *metrics_; }
  const Authenticator& authenticator() const { return *auth_; }
  RefusalLog& refusals() { return *refusals_; }
  const CallGate& gate() const { return *gate_; }
  // GetStatus calls answered OK, all on the status queue's own thread (async_queues.h).
  uint64_t status_calls() const;
  // Tells clients (Hello) where the HTTP endpoint listens.
  void SetHttpPort(int port);

  // Stops accepting calls, cancels waiting ones (after `grace`), stops the ticker. Idempotent.
  void Shutdown(absl::Duration grace);

 private:
  CoordinatorServer(Job* job, KvStore* store, const Clock* clock, const ServerOptions& options);
  void TickLoop();

  Job* const job_;
  KvStore* const store_;
  const Clock* const clock_;
  const absl::Duration tick_;
  std::unique_ptr<Authenticator> auth_;
  std::unique_ptr<RefusalLog> refusals_;
  std::unique_ptr<CallGate> gate_;
  std::unique_ptr<RpcMetrics> metrics_;
  std::unique_ptr<StatusCache> cache_;
  std::unique_ptr<History> history_;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<AsyncQueues> status_queue_;   // GetStatus, apart from the workers' calls
  std::unique_ptr<AsyncQueues> parked_queues_;  // Register and Rejoin, apart from the rest
  int port_ = 0;
  std::string address_;
  std::string tls_cert_;
  absl::Notification stop_ticker_;
  std::thread ticker_;
  bool shut_down_ = false;
};

// The host part for --listen's default: this node's routable address (the hostname's first
// non-loopback IPv4 address), else 127.0.0.1.
std::string DefaultListenHost();

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_RPC_SERVER_H_
