#include "coordinator/line_logger.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

TEST(LineLoggerTest, AppendsWholeTimestampedLines) {
  const std::string path = ::testing::TempDir() + "/line_logger_test." + std::to_string(::getpid());
  { std::ofstream(path) << "earlier\n"; }
  {
    auto logger = LineLogger::Open(path);
    ASSERT_TRUE(logger.ok()) << logger.status();
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 50; ++i) (*logger)->Log(absl::StrCat("thread ", t, " line ", i));
      });
    }
    for (auto& th : threads) th.join();
  }
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "earlier") << "the file is appended to";
  int n = 0;
  while (std::getline(in, line)) {
    EXPECT_THAT(line, MatchesRegex("[0-9-]+T[0-9:.]+ ddp-coordinator: thread [0-3] line [0-9]+"));
    ++n;
  }
  EXPECT_EQ(n, 200);
  ::unlink(path.c_str());
}

TEST(LineLoggerTest, AFileThatCannotBeOpenedIsAUsageError) {
  auto logger = LineLogger::Open("/nonexistent-dir/x.log");
  EXPECT_TRUE(absl::IsInvalidArgument(logger.status())) << logger.status();
  EXPECT_THAT(std::string(logger.status().message()), HasSubstr("--log-file"));
  EXPECT_TRUE(LineLogger::Open("").ok()) << "stderr only";
}

}  // namespace
}  // namespace ddp
