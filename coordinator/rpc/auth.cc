#include "coordinator/rpc/auth.h"

#include <grpcpp/server_context.h>

namespace ddp {

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

absl::Status TokenChecker::CheckHeader(absl::string_view header) const {
  if (header.empty()) return absl::UnauthenticatedError("missing authorization token");
  if (!ConstantTimeEquals(header, expected_)) {
    return absl::UnauthenticatedError("wrong authorization token");
  }
  return absl::OkStatus();
}

absl::Status TokenChecker::Check(const grpc::ServerContextBase& context) const {
  const auto& md = context.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return CheckHeader("");
  return CheckHeader(absl::string_view(it->second.data(), it->second.size()));
}

}  // namespace ddp
