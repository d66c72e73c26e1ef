// Bearer-token check for every coordinator RPC: metadata `authorization: Bearer <token>`,
// compared in constant time. A failure is UNAUTHENTICATED and changes nothing.
//
// Thread safety: immutable after construction; Check is safe from any thread.
#ifndef SLURM_DDP_COORDINATOR_RPC_AUTH_H_
#define SLURM_DDP_COORDINATOR_RPC_AUTH_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace grpc {
class ServerContextBase;
}

namespace ddp {

class TokenChecker {
 public:
  explicit TokenChecker(std::string token) : expected_("Bearer " + std::move(token)) {}

  // OK, or UNAUTHENTICATED naming what was wrong (never echoing the token).
  absl::Status Check(const grpc::ServerContextBase& context) const;
  absl::Status CheckHeader(absl::string_view header) const;

 private:
  const std::string expected_;
};

// Compares without an early exit, so timing does not reveal the matching prefix.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_RPC_AUTH_H_
