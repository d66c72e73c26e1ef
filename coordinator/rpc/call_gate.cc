#include "coordinator/rpc/call_gate.h"

#include <grpcpp/server_context.h>

#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ddp {

CallGate::CallGate(const Authenticator* auth, RefusalLog* refusals, const Clock* clock,
                   const CallBudgets& budgets)
    : auth_(auth), refusals_(refusals), clock_(clock), budgets_(budgets) {}

std::string CallGate::AddressOf(absl::string_view peer) {
  if (!absl::StartsWith(peer, "ipv4:") && !absl::StartsWith(peer, "ipv6:")) {
    return std::string(peer);
  }
  const size_t colon = peer.rfind(':');
  // "ipv4:" alone, or an IPv6 address without a port ("ipv6:[::1]").
  if (colon <= 4 || peer.back() == ']') return std::string(peer);
  return std::string(peer.substr(0, colon));
}

absl::Status CallGate::Admit(Role role, absl::string_view peer, GateTicket* ticket) {
  ticket->role = role;
  if (role == Role::kWorker) {
    if (worker_in_flight_.fetch_add(1, std::memory_order_relaxed) < budgets_.worker_calls) {
      ticket->admitted = true;
      return absl::OkStatus();
    }
    worker_in_flight_.fetch_sub(1, std::memory_order_relaxed);
    return absl::ResourceExhaustedError(absl::StrCat("coordinator busy: ", budgets_.worker_calls,
                                                     " worker calls in flight, the limit "
                                                     "(--max-worker-calls); retry later"));
  }
  std::string address = AddressOf(peer);
  absl::MutexLock lock(&mu_);
  if (operator_in_flight_ >= budgets_.operator_calls) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "coordinator busy: ", budgets_.operator_calls,
        " view/control calls in flight, the limit (--max-operator-calls); retry later"));
  }
  size_t& mine = per_address_[address];
  if (mine >= budgets_.operator_calls_per_address) {
    return absl::ResourceExhaustedError(
        absl::StrCat("coordinator busy: ", budgets_.operator_calls_per_address,
                     " view/control calls in flight from ", address,
                     ", the limit per address (--max-operator-calls-per-address); retry later"));
  }
  ++mine;
  ++operator_in_flight_;
  ticket->address = std::move(address);
  ticket->admitted = true;
  return absl::OkStatus();
}

absl::Status CallGate::Enter(const grpc::ServerContextBase& ctx, absl::string_view method,
                             RoleMask allowed, GateTicket* ticket) {
  if (fence_) {
    if (absl::Status fenced = fence_(); !fenced.ok()) return fenced;
  }
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  const absl::string_view header = it == md.end()
                                       ? absl::string_view()
                                       : absl::string_view(it->second.data(), it->second.size());
  const Role role = auth_->RoleOf(header);
  ticket->role = role;
  absl::Status st = Authenticator::CheckRole(role, !header.empty(), allowed, method);
  if (st.ok()) {
    st = Admit(role, ctx.peer(), ticket);
    if (st.ok()) return st;
  }
  const bool names_method = absl::StartsWith(st.message(), method);
  refusals_->Record(
      names_method ? std::string(st.message()) : absl::StrCat(method, ": ", st.message()),
      ctx.peer());
  return st;
}

void CallGate::Leave(GateTicket* ticket) {
  if (!ticket->admitted) return;
  ticket->admitted = false;
  if (ticket->role == Role::kWorker) {
    worker_in_flight_.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  absl::MutexLock lock(&mu_);
  --operator_in_flight_;
  auto it = per_address_.find(ticket->address);
  if (it != per_address_.end() && --it->second == 0) per_address_.erase(it);
}

void CallGate::AwaitRequest(grpc::ServerContextBase* ctx, const GateTicket& ticket,
                            absl::string_view method) {
  if (ticket.role == Role::kWorker || !ticket.admitted) return;
  absl::MutexLock lock(&mu_);
  awaited_[ctx] =
      Awaited{clock_->Now() + budgets_.first_message_timeout, std::string(method), ticket.address};
}

void CallGate::RequestArrived(grpc::ServerContextBase* ctx) {
  absl::MutexLock lock(&mu_);
  awaited_.erase(ctx);
}

size_t CallGate::ExpireAwaitedRequests() {
  std::vector<std::pair<std::string, std::string>> expired;  // method, address
  {
    absl::MutexLock lock(&mu_);
    if (awaited_.empty()) return 0;
    const absl::Time now = clock_->Now();
    for (auto it = awaited_.begin(); it != awaited_.end();) {
      if (it->second.deadline > now) {
        ++it;
        continue;
      }
      // Under mu_: the call cannot end before it has called RequestArrived, which waits for
      // mu_, so the context is valid here. gRPC runs the call's reactions (its failed read,
      // OnDone) on its own threads or the call's queue, never inside TryCancel.
      it->first->TryCancel();
      expired.emplace_back(std::move(it->second.method), std::move(it->second.address));
      awaited_.erase(it++);
    }
  }
  const std::string seconds = absl::FormatDuration(budgets_.first_message_timeout);
  for (const auto& [method, address] : expired) {
    refusals_->Record(absl::StrCat(method, ": no request message within ", seconds, "; cancelled"),
                      address);
  }
  return expired.size();
}

size_t CallGate::operator_in_flight() const {
  absl::MutexLock lock(&mu_);
  return operator_in_flight_;
}

size_t CallGate::in_flight() const { return worker_in_flight() + operator_in_flight(); }

size_t CallGate::awaited() const {
  absl::MutexLock lock(&mu_);
  return awaited_.size();
}

}  // namespace ddp
