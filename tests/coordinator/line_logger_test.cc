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

TEST(EscapeControlCharactersTest, SpellsOutEveryByteThatCouldEndOrRewriteALine) {
  EXPECT_EQ(EscapeControlCharacters("plain text, UTF-8 \xc3\xa9 and \xe2\x82\xac"),
            "plain text, UTF-8 \xc3\xa9 and \xe2\x82\xac");
  EXPECT_EQ(EscapeControlCharacters("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(EscapeControlCharacters(std::string("nul\0bel\a esc\x1b[31m del\x7f", 22)),
            "nul\\x00bel\\x07 esc\\x1b[31m del\\x7f");
  // C1 controls as UTF-8 (U+009B is a CSI to some terminals); other two-byte characters stay.
  EXPECT_EQ(EscapeControlCharacters("csi\xc2\x9b nel\xc2\x85 nbsp\xc2\xa0"),
            "csi\\u009b nel\\u0085 nbsp\xc2\xa0");
  // A backslash is doubled, so "\\n" in the output is always an escaped newline.
  EXPECT_EQ(EscapeControlCharacters("C:\\dir \\n"), "C:\\\\dir \\\\n");
  EXPECT_EQ(EscapeControlCharacters(""), "");
  EXPECT_EQ(EscapeControlCharacters("\xc2"), "\xc2") << "a lone lead byte at the end";
}

TEST(LineLoggerTest, AMessageIsAlwaysOneLine) {
  const std::string path =
      ::testing::TempDir() + "/line_logger_escape_test." + std::to_string(::getpid());
  ::unlink(path.c_str());
  {
    auto logger = LineLogger::Open(path);
    ASSERT_TRUE(logger.ok()) << logger.status();
    (*logger)->Log("rank 3 failed: boom\njob SUCCEEDED: every rank finished\r\n");
    (*logger)->Log("next");
  }
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[0], MatchesRegex("[0-9-]+T[0-9:.]+ ddp-coordinator: rank 3 failed: "
                                     "boom\\\\njob SUCCEEDED: every rank finished\\\\r\\\\n"));
  EXPECT_THAT(lines[1], HasSubstr("ddp-coordinator: next"));
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
