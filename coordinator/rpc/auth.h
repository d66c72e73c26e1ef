// Bearer tokens by role. Each job has three random tokens (common/dist_file.h):
//   worker   the job's own RPCs: register, the c10d store, shards, heartbeats, checkpoints, done,
//            lost workers (ddp-trainer and its workers)
//   view     reading status: GetStatus, WatchStatus, the dashboard, /api/*, /metrics (safe to
//            share: it can neither change the job nor read the store)
//   control  stop and abort, and everything the view token allows (ddpctl)
// Hello answers any of them. A call carries `authorization: Bearer <token>` (HTTP: the header or
// `?token=`). Tokens are compared in constant time and never echoed. A missing or unknown token
// is UNAUTHENTICATED; a known token of a role the method does not admit is PERMISSION_DENIED,
// naming the token the method needs.
//
// Thread safety: immutable after construction; every method is safe from any thread.
#ifndef SLURM_DDP_COORDINATOR_RPC_AUTH_H_
#define SLURM_DDP_COORDINATOR_RPC_AUTH_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ddp {

enum class Role : uint8_t { kNone = 0, kWorker = 1, kView = 2, kControl = 4 };
const char* RoleName(Role role);  // "worker", "view", "control", "none"

// A set of roles: an OR of Role bits.
using RoleMask = uint8_t;
constexpr RoleMask Roles(Role r) { return static_cast<RoleMask>(r); }
inline constexpr RoleMask kWorkerRoles = Roles(Role::kWorker);
inline constexpr RoleMask kViewRoles = Roles(Role::kView) | Roles(Role::kControl);
inline constexpr RoleMask kControlRoles = Roles(Role::kControl);
inline constexpr RoleMask kAnyRole = kWorkerRoles | kViewRoles;

struct RoleTokens {
  std::string worker;
  std::string view;
  std::string control;
};

class Authenticator {
 public:
  // INVALID_ARGUMENT unless the three tokens are non-empty and distinct.
  static absl::StatusOr<Authenticator> Create(RoleTokens tokens);

  // The role `header` ("Bearer <token>") proves, or kNone. Compares against every token without
  // an early exit.
  Role RoleOf(absl::string_view header) const;
  // The role a bare token (an HTTP ?token= parameter) proves, or kNone.
  Role RoleOfToken(absl::string_view token) const;
  // OK when `header` proves a role in `allowed`; otherwise UNAUTHENTICATED ("missing
  // authorization token", "wrong authorization token") or PERMISSION_DENIED ("<what> needs the
  // control token; this is the view token").
  absl::Status Check(absl::string_view header, RoleMask allowed, absl::string_view what) const;
  // The same for a role already known.
  static absl::Status CheckRole(Role role, bool header_present, RoleMask allowed,
                                absl::string_view what);

  const std::string& view_token() const { return tokens_.view; }

 private:
  explicit Authenticator(RoleTokens tokens);

  RoleTokens tokens_;
  std::string worker_header_;
  std::string view_header_;
  std::string control_header_;
};

// Compares without an early exit, so timing does not reveal the matching prefix.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_RPC_AUTH_H_
