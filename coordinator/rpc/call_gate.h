// The door every coordinator call passes before a byte of its body is read: the token on its
// headers must prove a role the method admits (auth.h), and the server must have room for one
// more call (calls in flight, parked ones such as a waiting Register or StoreGet included, are
// bounded, so no client can grow the server's per-call state without bound). A refused call is
// answered at once (UNAUTHENTICATED, PERMISSION_DENIED or RESOURCE_EXHAUSTED) and counted in the
// RefusalLog; its body is never read.
//
// Thread safety: every method is thread-safe.
#ifndef SLURM_DDP_COORDINATOR_RPC_CALL_GATE_H_
#define SLURM_DDP_COORDINATOR_RPC_CALL_GATE_H_

#include <atomic>
#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "coordinator/rpc/auth.h"
#include "coordinator/rpc/refusal_log.h"

namespace grpc {
class ServerContextBase;
}

namespace ddp {

class CallGate {
 public:
  // The pointers must outlive the gate.
  CallGate(const Authenticator* auth, RefusalLog* refusals, size_t max_calls);
  CallGate(const CallGate&) = delete;
  CallGate& operator=(const CallGate&) = delete;

  // OK: the call holds a slot until Leave() and `*role` is the caller's role. Otherwise the
  // refusal, already logged.
  absl::Status Enter(const grpc::ServerContextBase& ctx, absl::string_view method, RoleMask allowed,
                     Role* role);
  void Leave();

  size_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }
  size_t max_calls() const { return max_calls_; }
  const Authenticator& auth() const { return *auth_; }
  RefusalLog& refusals() { return *refusals_; }

 private:
  const Authenticator* const auth_;
  RefusalLog* const refusals_;
  const size_t max_calls_;
  std::atomic<size_t> in_flight_{0};
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_RPC_CALL_GATE_H_
