#include "coordinator/rpc/auth.h"

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

TEST(AuthTest, ConstantTimeEquals) {
  struct Case {
    std::string a;
    std::string b;
    bool want;
  };
  const std::vector<Case> cases = {
      {"", "", true},
      {"abc", "abc", true},
      {"abc", "abd", false},
      {"abc", "ab", false},
      {"ab", "abc", false},
      {"", "a", false},
      {std::string("a\0b", 3), std::string("a\0c", 3), false},
  };
  for (const Case& c : cases) EXPECT_EQ(ConstantTimeEquals(c.a, c.b), c.want) << c.a << "|" << c.b;
}

Authenticator MakeAuth() {
  absl::StatusOr<Authenticator> auth = Authenticator::Create({"w0rker", "v1ew", "c0ntrol"});
  EXPECT_TRUE(auth.ok()) << auth.status();
  return *std::move(auth);
}

TEST(AuthTest, HeaderProvesOneRoleOrNone) {
  const Authenticator auth = MakeAuth();
  struct Case {
    const char* header;
    Role role;
  };
  const std::vector<Case> cases = {
      {"Bearer w0rker", Role::kWorker},   {"Bearer v1ew", Role::kView},
      {"Bearer c0ntrol", Role::kControl}, {"", Role::kNone},
      {"Bearer wrong", Role::kNone},      {"w0rker", Role::kNone},
      {"Bearer w0rker ", Role::kNone},    {"bearer w0rker", Role::kNone},
      {"Bearer ", Role::kNone},
  };
  for (const Case& c : cases) EXPECT_EQ(auth.RoleOf(c.header), c.role) << c.header;
  EXPECT_EQ(auth.RoleOfToken("v1ew"), Role::kView);
  EXPECT_EQ(auth.RoleOfToken("Bearer v1ew"), Role::kNone);
  EXPECT_EQ(auth.RoleOfToken(""), Role::kNone);
}

// The role table of docs/security.md, "Tokens by role": which token may call what, and the errors
// that say so.
TEST(AuthTest, EachRoleReachesOnlyItsMethods) {
  const Authenticator auth = MakeAuth();
  struct Case {
    const char* header;
    RoleMask allowed;
    absl::StatusCode want;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"Bearer w0rker", kWorkerRoles, absl::StatusCode::kOk, ""},
      {"Bearer v1ew", kViewRoles, absl::StatusCode::kOk, ""},
      {"Bearer c0ntrol", kViewRoles, absl::StatusCode::kOk, ""},
      {"Bearer c0ntrol", kControlRoles, absl::StatusCode::kOk, ""},
      {"Bearer v1ew", kAnyRole, absl::StatusCode::kOk, ""},
      {"Bearer v1ew", kControlRoles, absl::StatusCode::kPermissionDenied,
       "M needs the control token; this is the view token"},
      {"Bearer v1ew", kWorkerRoles, absl::StatusCode::kPermissionDenied,
       "M needs the worker token; this is the view token"},
      {"Bearer w0rker", kViewRoles, absl::StatusCode::kPermissionDenied,
       "M needs a view or control token; this is the worker token"},
      {"Bearer w0rker", kControlRoles, absl::StatusCode::kPermissionDenied,
       "M needs the control token; this is the worker token"},
      {"Bearer c0ntrol", kWorkerRoles, absl::StatusCode::kPermissionDenied,
       "M needs the worker token; this is the control token"},
      {"", kAnyRole, absl::StatusCode::kUnauthenticated, "missing authorization token"},
      {"Bearer nope", kAnyRole, absl::StatusCode::kUnauthenticated, "wrong authorization token"},
  };
  for (const Case& c : cases) {
    absl::Status st = auth.Check(c.header, c.allowed, "M");
    EXPECT_EQ(st.code(), c.want) << c.header << ": " << st;
    EXPECT_EQ(st.message(), c.message) << c.header;
    for (const char* secret : {"w0rker", "v1ew", "c0ntrol"}) {
      EXPECT_EQ(std::string(st.message()).find(secret), std::string::npos) << "never echoed";
    }
  }
}

TEST(AuthTest, TokensMustBeThreeDistinctOnes) {
  EXPECT_FALSE(Authenticator::Create({"a", "", "c"}).ok());
  EXPECT_FALSE(Authenticator::Create({"a", "a", "c"}).ok());
  EXPECT_FALSE(Authenticator::Create({"a", "b", "a"}).ok());
  EXPECT_TRUE(Authenticator::Create({"a", "b", "c"}).ok());
}

}  // namespace
}  // namespace ddp
