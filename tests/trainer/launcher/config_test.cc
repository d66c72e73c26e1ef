// ddp-trainer's flags as ParseTrainerFlags reads them: a number that is not finite (inf, nan) is
// a usage error naming the flag, where CLI11's own range checks let it through.
#include "trainer/launcher/config.h"

#include <string>
#include <vector>

#include "common/exit_codes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<TrainerConfig> Parse(std::vector<std::string> args, int* exit_code) {
  args.insert(args.begin(), "ddp-trainer");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return ParseTrainerFlags(static_cast<int>(argv.size()), argv.data(), exit_code);
}

TEST(TrainerConfigTest, NonFiniteNumbersAreRefusedNamingTheFlag) {
  for (const char* flag :
       {"--lr", "--weight-decay", "--momentum", "--heartbeat-timeout", "--registration-timeout",
        "--stall-timeout", "--stop-timeout", "--coordinator-grace", "--pg-timeout", "--linger"}) {
    for (const char* value : {"inf", "+inf", "Infinity", "nan", "-nan"}) {
      SCOPED_TRACE(std::string(flag) + " " + value);
      int exit_code = -1;
      absl::StatusOr<TrainerConfig> c = Parse({flag, value}, &exit_code);
      ASSERT_FALSE(c.ok()) << flag << " " << value << " was accepted";
      EXPECT_EQ(exit_code, kExitUsage);
      const std::string message(c.status().message());
      EXPECT_THAT(message, HasSubstr(flag));
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  }
}

TEST(TrainerConfigTest, FiniteNumbersAreKept) {
  int exit_code = -1;
  absl::StatusOr<TrainerConfig> c = Parse(
      {"--lr", "0.5", "--weight-decay", "0", "--linger", "0", "--seed", "9223372036854775807"},
      &exit_code);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(exit_code, kExitOk);
  EXPECT_EQ(c->lr, 0.5);
  EXPECT_EQ(c->seed, INT64_MAX);
  EXPECT_FALSE(Parse({"--lr", "-1"}, &exit_code).ok()) << "the range checks still apply";
}

}  // namespace
}  // namespace ddp
