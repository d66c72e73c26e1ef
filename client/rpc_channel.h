// Internal to client/: the one place that builds gRPC channels and runs calls with a deadline,
// the bearer token and jittered exponential backoff on UNAVAILABLE. Includes gRPC; never include
// it from a public client header.
//
// Thread safety: RpcChannel is immutable after Open; Call is safe from any thread.
#ifndef SLURM_DDP_CLIENT_RPC_CHANNEL_H_
#define SLURM_DDP_CLIENT_RPC_CHANNEL_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "common/dist_file.h"
#include "proto/coordinator.grpc.pb.h"

namespace ddp {

// Free text as it may cross the wire: invalid UTF-8 replaced (U+FFFD), then cut at a code point
// boundary to at most `max_bytes` (the coordinator's limit for reasons and messages is 4 KiB).
inline constexpr size_t kMaxWireTextBytes = 4096;
std::string WireText(absl::string_view text, size_t max_bytes = kMaxWireTextBytes);

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

  slurm_ddp::v1::Coordinator::Stub& stub() const { return *stub_; }
  const DistFileContents& endpoint() const { return endpoint_; }
  // The token every call carries.
  const std::string& token() const { return token_; }
  absl::Duration rpc_timeout() const { return rpc_timeout_; }
  int world_size() const { return world_size_; }

 private:
  RpcChannel() = default;

  DistFileContents endpoint_;  // address, tokens, nonce (nonce empty without a dist_file)
  std::string token_;
  absl::Duration rpc_timeout_;
  int world_size_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<slurm_ddp::v1::Coordinator::Stub> stub_;
};

}  // namespace ddp

#endif  // SLURM_DDP_CLIENT_RPC_CHANNEL_H_
