// The door every coordinator call passes before a byte of its body is read: the token on its
// headers must prove a role the method admits (auth.h), and the caller's role must have room for
// one more call. A refused call is answered at once (UNAUTHENTICATED, PERMISSION_DENIED or
// RESOURCE_EXHAUSTED) and counted in the RefusalLog; its body is never read.
//
// Budgets by role: calls in flight (parked ones such as a waiting Register or StoreGet included)
// are bounded per role, so that no client can grow the server's per-call state without bound and
// no role can take another's room:
//   worker         the job's own calls (Register, Heartbeat, the store, shards, ...): a budget
//                  of their own (CallBudgets::worker_calls) that no view or control call counts
//                  against. Only the job holds the worker token.
//   view/control   operators' calls (GetStatus, WatchStatus, Stop, Hello): a budget shared by
//                  every operator (operator_calls) and a smaller one per client address
//                  (operator_calls_per_address: the address without its port, so one host's many
//                  connections count together). An admitted operator call whose request message
//                  has not arrived within first_message_timeout is cancelled by
//                  ExpireAwaitedRequests (the server's ticker), which gives its slot back: a
//                  stream opened with the view token that never sends its request holds a slot
//                  for seconds, not for the life of the connection.
// So however many view-token streams a neighbour opens, the job's heartbeats find their budget
// free: the neighbour can at most keep other operators waiting (from its own address first).
//
// Thread safety: every method is thread-safe. Worker calls take no lock (one atomic counter);
// operator calls take `mu_`. ExpireAwaitedRequests cancels calls with `mu_` held, so a call's
// context stays valid meanwhile (a call leaves the awaited set, under `mu_`, before it can end).
#ifndef SLURM_DDP_COORDINATOR_RPC_CALL_GATE_H_
#define SLURM_DDP_COORDINATOR_RPC_CALL_GATE_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/clock.h"
#include "coordinator/rpc/auth.h"
#include "coordinator/rpc/refusal_log.h"

namespace grpc {
class ServerContextBase;
}

namespace ddp {

struct CallBudgets {
  // Worker-token calls in flight; 0: 16 per rank of the job plus 1024 (the server fills it in).
  size_t worker_calls = 0;
  // View- and control-token calls in flight, from every address together, and from one address.
  size_t operator_calls = 1024;
  size_t operator_calls_per_address = 64;
  // An admitted view or control call whose request has not arrived by then is cancelled.
  absl::Duration first_message_timeout = absl::Seconds(5);
};

// What an admitted call holds until CallGate::Leave. Owned by the call.
struct GateTicket {
  Role role = Role::kNone;
  bool admitted = false;
  std::string address;  // the client's address without its port (view and control calls)
};

class CallGate {
 public:
  // The pointers must outlive the gate. `budgets.worker_calls` must be set (non-zero).
  CallGate(const Authenticator* auth, RefusalLog* refusals, const Clock* clock,
           const CallBudgets& budgets);
  CallGate(const CallGate&) = delete;
  CallGate& operator=(const CallGate&) = delete;

  // OK: the call holds a slot of its role's budget until Leave() and `ticket` says which.
  // Otherwise the refusal, already logged (the ticket is not admitted).
  absl::Status Enter(const grpc::ServerContextBase& ctx, absl::string_view method, RoleMask allowed,
                     GateTicket* ticket);
  // Takes a slot for a caller whose role is known; `peer` is gRPC's peer string
  // ("ipv4:10.0.0.7:41234"). Enter's budget check alone, without logging (tests use it).
  absl::Status Admit(Role role, absl::string_view peer, GateTicket* ticket);
  // A check every call passes first, before its token (coordinator/epoch_lease.h): a call is
  // refused with what it returns when that is not OK. Set before serving; none by default.
  void SetFence(std::function<absl::Status()> fence) { fence_ = std::move(fence); }
  // Gives the ticket's slot back; does nothing for a ticket not admitted (or already left).
  void Leave(GateTicket* ticket);

  // Called by an admitted call just before it starts reading its request: a view or control
  // call is cancelled (ctx->TryCancel) if RequestArrived has not been called for `ctx` within
  // the first-message timeout. `ctx` must stay valid until RequestArrived(ctx), which the call
  // must make when its read completes, whether it succeeded or not.
  void AwaitRequest(grpc::ServerContextBase* ctx, const GateTicket& ticket,
                    absl::string_view method);
  void RequestArrived(grpc::ServerContextBase* ctx);
  // Cancels every awaited call past its deadline (the server's ticker); returns how many.
  size_t ExpireAwaitedRequests();

  size_t in_flight() const;  // every role
  size_t worker_in_flight() const { return worker_in_flight_.load(std::memory_order_relaxed); }
  size_t operator_in_flight() const;
  size_t awaited() const;  // calls waiting for their request
  const CallBudgets& budgets() const { return budgets_; }
  const Authenticator& auth() const { return *auth_; }
  RefusalLog& refusals() { return *refusals_; }

  // "ipv4:10.0.0.7:41234" -> "ipv4:10.0.0.7"; "ipv6:[::1]:5" -> "ipv6:[::1]"; others unchanged.
  static std::string AddressOf(absl::string_view peer);

 private:
  struct Awaited {
    absl::Time deadline;
    std::string method;
    std::string address;
  };

  const Authenticator* const auth_;
  RefusalLog* const refusals_;
  const Clock* const clock_;
  const CallBudgets budgets_;
  std::function<absl::Status()> fence_;
  std::atomic<size_t> worker_in_flight_{0};
  mutable absl::Mutex mu_;
  size_t operator_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, size_t> per_address_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<grpc::ServerContextBase*, Awaited> awaited_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_RPC_CALL_GATE_H_
