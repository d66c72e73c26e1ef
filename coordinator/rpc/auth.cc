#include "coordinator/rpc/auth.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ddp {
namespace {

// "the control token", "a view or control token", ...
std::string NeededTokens(RoleMask allowed) {
  std::string names;
  int n = 0;
  for (Role r : {Role::kWorker, Role::kView, Role::kControl}) {
    if ((allowed & Roles(r)) == 0) continue;
    absl::StrAppend(&names, n == 0 ? "" : " or ", RoleName(r));
    ++n;
  }
  return n == 1 ? absl::StrCat("the ", names, " token") : absl::StrCat("a ", names, " token");
}

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kWorker:
      return "worker";
    case Role::kView:
      return "view";
    case Role::kControl:
      return "control";
    case Role::kNone:
      break;
  }
  return "none";
}

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

Authenticator::Authenticator(RoleTokens tokens)
    : tokens_(std::move(tokens)),
      worker_header_("Bearer " + tokens_.worker),
      view_header_("Bearer " + tokens_.view),
      control_header_("Bearer " + tokens_.control) {}

absl::StatusOr<Authenticator> Authenticator::Create(RoleTokens tokens) {
  if (tokens.worker.empty() || tokens.view.empty() || tokens.control.empty()) {
    return absl::InvalidArgumentError("the coordinator needs a worker, a view and a control token");
  }
  if (tokens.worker == tokens.view || tokens.worker == tokens.control ||
      tokens.view == tokens.control) {
    return absl::InvalidArgumentError("the worker, view and control tokens must differ");
  }
  return Authenticator(std::move(tokens));
}

Role Authenticator::RoleOf(absl::string_view header) const {
  // Every comparison runs, whichever matches.
  const bool worker = ConstantTimeEquals(header, worker_header_);
  const bool view = ConstantTimeEquals(header, view_header_);
  const bool control = ConstantTimeEquals(header, control_header_);
  if (control) return Role::kControl;
  if (view) return Role::kView;
  if (worker) return Role::kWorker;
  return Role::kNone;
}

Role Authenticator::RoleOfToken(absl::string_view token) const {
  const bool worker = ConstantTimeEquals(token, tokens_.worker);
  const bool view = ConstantTimeEquals(token, tokens_.view);
  const bool control = ConstantTimeEquals(token, tokens_.control);
  if (control) return Role::kControl;
  if (view) return Role::kView;
  if (worker) return Role::kWorker;
  return Role::kNone;
}

absl::Status Authenticator::CheckRole(Role role, bool header_present, RoleMask allowed,
                                      absl::string_view what) {
  if (role == Role::kNone) {
    return absl::UnauthenticatedError(header_present ? "wrong authorization token"
                                                     : "missing authorization token");
  }
  if ((allowed & Roles(role)) == 0) {
    return absl::PermissionDeniedError(absl::StrCat(what, " needs ", NeededTokens(allowed),
                                                    "; this is the ", RoleName(role), " token"));
  }
  return absl::OkStatus();
}

absl::Status Authenticator::Check(absl::string_view header, RoleMask allowed,
                                  absl::string_view what) const {
  return CheckRole(RoleOf(header), !header.empty(), allowed, what);
}

}  // namespace ddp
