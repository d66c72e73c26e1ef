// RefusalLog: a flood of refusals costs one log line per interval, whose counts add up; memory
// stays bounded however many distinct reasons and peers arrive.
#include "coordinator/rpc/refusal_log.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(RefusalLogTest, AFloodCostsOneLinePerIntervalWithCounts) {
  FakeClock clock;
  std::vector<std::string> lines;
  RefusalLog log(&clock, absl::Seconds(1), [&](const std::string& l) { lines.push_back(l); });
  log.Record("StoreCheck: missing authorization token", "ipv4:10.0.0.7:1");
  ASSERT_EQ(lines.size(), 1u);  // the first refusal after a quiet interval: at once
  EXPECT_THAT(lines[0], HasSubstr("refused 1 call(s): 1 StoreCheck: missing authorization token"));
  for (int i = 0; i < 10000; ++i) {
    log.Record(i % 4 == 0 ? "Stop: needs the control token; this is the view token"
                          : "StoreCheck: missing authorization token",
               absl::StrCat("ipv4:10.0.0.", i % 50, ":2"));
    if (i % 1000 == 999) clock.Advance(absl::Milliseconds(100));
  }
  EXPECT_EQ(lines.size(), 1u);  // 10000 refusals within the interval: no new line yet
  log.Flush();
  ASSERT_EQ(lines.size(), 2u);  // 1 s passed: one summary
  EXPECT_THAT(lines[1], HasSubstr("refused 10000 call(s) in "));
  EXPECT_THAT(lines[1], HasSubstr("7500 StoreCheck: missing authorization token"));
  EXPECT_THAT(lines[1], HasSubstr("2500 Stop: needs the control token"));
  // Three example peers (200 calls each); the other 9400 calls are counted, not listed.
  EXPECT_THAT(lines[1], HasSubstr("from ipv4:10.0.0.0:2, ipv4:10.0.0.1:2, ipv4:10.0.0.2:2 (+9400 "
                                  "from other peers)"));
  log.Flush();
  EXPECT_EQ(lines.size(), 2u);  // nothing pending
  EXPECT_EQ(log.total(), 10001u);
  EXPECT_EQ(log.lines(), 2u);
}

TEST(RefusalLogTest, DistinctReasonsBeyondTheBoundCountAsOther) {
  FakeClock clock;
  std::vector<std::string> lines;
  RefusalLog log(&clock, absl::Seconds(1), [&](const std::string& l) { lines.push_back(l); });
  log.Record("first", "p");  // logged at once; the next line summarizes what follows
  for (int i = 0; i < 1000; ++i)
    log.Record(absl::StrCat("reason ", i, std::string(1000, 'x')), "p");
  clock.Advance(absl::Seconds(1));
  log.Flush();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[1], HasSubstr(absl::StrCat(": ", 1000 - RefusalLog::kMaxReasons, " other, ")));
  EXPECT_LT(lines[1].size(), RefusalLog::kMaxReasons * 256 + 1024);  // fields are cut
  EXPECT_THAT(lines[1], Not(HasSubstr(std::string(300, 'x'))));
}

}  // namespace
}  // namespace ddp
