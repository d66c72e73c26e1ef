#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/run_shell.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;

using ::ddp::testing::RunShell;

std::string Ddpctl() {
  const char* bin = std::getenv("DDP_BIN_DIR");
  return bin == nullptr ? "" : std::string(bin) + "/ddpctl";
}

TEST(DdpctlTest, HelpExitsZero) {
  if (Ddpctl().empty()) GTEST_SKIP() << "DDP_BIN_DIR is unset";
  std::string out;
  EXPECT_EQ(RunShell(Ddpctl() + " --help", &out), 0);
  EXPECT_THAT(out, HasSubstr("status"));
  EXPECT_EQ(RunShell(Ddpctl() + " status --help", &out), 0);
  EXPECT_THAT(out, HasSubstr("--json"));
}

TEST(DdpctlTest, UnknownFlagIsOneLineAndNonZero) {
  if (Ddpctl().empty()) GTEST_SKIP() << "DDP_BIN_DIR is unset";
  std::string out;
  EXPECT_EQ(RunShell(Ddpctl() + " status --bogus", &out), 2);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_THAT(out, HasSubstr("ddpctl:"));
}

TEST(DdpctlTest, NoJobGivenIsAClearError) {
  if (Ddpctl().empty()) GTEST_SKIP() << "DDP_BIN_DIR is unset";
  std::string out;
  EXPECT_EQ(RunShell("env -u DDP_DIST_FILE " + Ddpctl() + " status", &out), 1);
  EXPECT_THAT(out, HasSubstr("--dist-file"));
}

// A self-signed certificate (any will do: nothing answers at the address).
constexpr char kSomeCertificate[] =
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBlTCCATugAwIBAgIUZP27nLI4NAkA5rwQCDoEDClYWRUwCgYIKoZIzj0EAwIw\n"
    "IDEeMBwGA1UEAwwVc2x1cm0tZGRwLWNvb3JkaW5hdG9yMB4XDTI2MTIwNTA0MTE1\n"
    "NFoXDTM2MTIwMjA0MTE1NFowIDEeMBwGA1UEAwwVc2x1cm0tZGRwLWNvb3JkaW5h\n"
    "dG9yMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEcISgIwE1V3j4p7cXFYmynNFQ\n"
    "fIHX5ve9DTbowEWMe3RVKJRgg9smC/NqFOwOyV0L77tdGS1DpYczE5qSuzQ7SqNT\n"
    "MFEwHQYDVR0OBBYEFKBJA7nMhzxdvjT01pv9pG/kPTNIMB8GA1UdIwQYMBaAFKBJ\n"
    "A7nMhzxdvjT01pv9pG/kPTNIMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwID\n"
    "SAAwRQIgDQK97ejWw/WpyxUqe8NoLdoRd3jItSO0pCpFt2gCVWYCIQC5gFJiqORs\n"
    "+paIg8fl6XmChLgtKC5KBjMejgD4nq5/RA==\n"
    "-----END CERTIFICATE-----\n";

TEST(DdpctlTest, UnreachableCoordinatorFailsWithinSeconds) {
  if (Ddpctl().empty()) GTEST_SKIP() << "DDP_BIN_DIR is unset";
  const std::string cert = ::testing::TempDir() + "/ddpctl_test_cert.pem";
  {
    std::FILE* f = std::fopen(cert.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(kSomeCertificate, f);
    std::fclose(f);
  }
  std::string out;
  absl::Time start = absl::Now();
  EXPECT_EQ(RunShell(Ddpctl() + " --timeout 2 --address 127.0.0.1:1 --token x --tls-cert " + cert +
                         " status",
                     &out),
            1);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_THAT(out, HasSubstr("unreachable"));
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

}  // namespace
}  // namespace ddp
