#include "coordinator/rpc/auth.h"

#include <string>
#include <vector>

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

TEST(AuthTest, HeaderMustBeTheBearerToken) {
  TokenChecker checker("s3cret");
  struct Case {
    const char* header;
    absl::StatusCode want;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"Bearer s3cret", absl::StatusCode::kOk, ""},
      {"", absl::StatusCode::kUnauthenticated, "missing authorization token"},
      {"Bearer wrong", absl::StatusCode::kUnauthenticated, "wrong authorization token"},
      {"s3cret", absl::StatusCode::kUnauthenticated, "wrong authorization token"},
      {"Bearer s3cret ", absl::StatusCode::kUnauthenticated, "wrong authorization token"},
      {"bearer s3cret", absl::StatusCode::kUnauthenticated, "wrong authorization token"},
  };
  for (const Case& c : cases) {
    absl::Status st = checker.CheckHeader(c.header);
    EXPECT_EQ(st.code(), c.want) << c.header;
    EXPECT_EQ(st.message(), c.message) << c.header;
    EXPECT_EQ(std::string(st.message()).find("s3cret"), std::string::npos) << "never echoed";
  }
}

}  // namespace
}  // namespace ddp
