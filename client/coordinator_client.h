// The worker's connection to its coordinator: CoordinatorApi over gRPC. This header is included by
// the data plane, so it exposes no gRPC or protobuf type (docs/architecture.md, "Layers").
//
// ConnectToCoordinator reads and verifies the dist_file (common/dist_file.h: polling until it
// appears, refusing foreign, stale, unsafe or malformed files), then confirms the file's nonce
// with the coordinator (Hello). Every call then carries the job's token, has a deadline, and
// retries UNAVAILABLE with jittered exponential backoff inside that deadline.
//
// Thread safety: the returned client is safe to use from several threads at once.
#ifndef SLURM_DDP_CLIENT_COORDINATOR_CLIENT_H_
#define SLURM_DDP_CLIENT_COORDINATOR_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/coordinator_api.h"

namespace ddp {

// Which of the dist_file's tokens a connection uses (coordinator/rpc/auth.h).
enum class TokenRole { kWorker, kView, kControl };

struct ConnectOptions {
  // Where the coordinator is: a dist_file (preferred), or an address plus a token.
  std::string dist_file;
  std::string address;     // host:port; used when dist_file is empty
  std::string token_file;  // with `address`: the token, read from this file (token_file.h)
  std::string token;       // with `address`, instead of token_file (tests; never a command line)
  // With `address`: the coordinator's TLS certificate (PEM), when the token file does not hold
  // it. With a dist_file, the file's own `tls_cert` is the one trusted.
  std::string tls_cert;
  // With a dist_file: whose token to present. With an address the given token is used as is.
  TokenRole role = TokenRole::kWorker;
  // What the dist_file must say. An empty job id accepts any job (operator tools).
  std::string expected_job_id;
  int64_t min_generation = 0;
  // How long to poll for the dist_file to appear and verify (zero: read it once).
  absl::Duration dist_file_timeout = absl::Seconds(60);
  // Deadline of each non-blocking call, retries included (also bounds Hello at connect time).
  absl::Duration rpc_timeout = absl::Seconds(10);
  // A worker whose task carries its calls (client/heartbeat_relay.h): its end of the relay
  // socket, owned by the client from then on. With a dist_file every call goes there (the worker
  // reads the file for its nonce and opens no connection of its own; the launcher's calls,
  // ReportLost, StandBy and Fences, are then refused); with an address only Heartbeat,
  // Register, Rejoin and GetShard do. -1: every call goes to the coordinator directly.
  int heartbeat_relay_fd = -1;
};

// Connects a worker. Errors are one line and name what failed (the file, the address, the nonce).
absl::StatusOr<std::unique_ptr<CoordinatorApi>> ConnectToCoordinator(const ConnectOptions& options);

}  // namespace ddp

#endif  // SLURM_DDP_CLIENT_COORDINATOR_CLIENT_H_
