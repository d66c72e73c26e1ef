#include "coordinator/rpc/call_gate.h"

#include <grpcpp/server_context.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ddp {

CallGate::CallGate(const Authenticator* auth, RefusalLog* refusals, size_t max_calls)
    : auth_(auth), refusals_(refusals), max_calls_(max_calls) {}

absl::Status CallGate::Enter(const grpc::ServerContextBase& ctx, absl::string_view method,
                             RoleMask allowed, Role* role) {
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  const absl::string_view header = it == md.end()
                                       ? absl::string_view()
                                       : absl::string_view(it->second.data(), it->second.size());
  *role = auth_->RoleOf(header);
  absl::Status st = Authenticator::CheckRole(*role, !header.empty(), allowed, method);
  if (st.ok()) {
    // Reserve a slot; give it back when the server is full.
    if (in_flight_.fetch_add(1, std::memory_order_relaxed) < max_calls_) return st;
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
    st = absl::ResourceExhaustedError(
        absl::StrCat("coordinator busy: ", max_calls_, " calls in flight, the limit; retry later"));
  }
  const bool names_method = absl::StartsWith(st.message(), method);
  refusals_->Record(
      names_method ? std::string(st.message()) : absl::StrCat(method, ": ", st.message()),
      ctx.peer());
  return st;
}

void CallGate::Leave() { in_flight_.fetch_sub(1, std::memory_order_relaxed); }

}  // namespace ddp
