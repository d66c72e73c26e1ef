#include "coordinator/job/event_log.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ddp {
namespace {

TEST(EventLogTest, StampsBoundsAndSendsToTheSinkAfterTheScope) {
  const absl::Time start = absl::FromUnixSeconds(100);
  std::vector<std::string> sunk;
  EventLog log(start, 3, [&sunk](const std::string& line) { sunk.push_back(line); });
  {
    Completions out;
    log.Add(start + absl::Milliseconds(1500), "one", &out);
    log.Add(start + absl::Seconds(2), "two", &out);
    log.LogOnly("table line", &out);
    EXPECT_TRUE(sunk.empty()) << "the sink must not run while the caller holds its lock";
  }
  EXPECT_EQ(sunk, (std::vector<std::string>{"one", "two", "table line"}));
  Completions out;
  log.Add(start + absl::Seconds(3), "three", &out);
  log.Add(start + absl::Seconds(4), "four", &out);
  EXPECT_EQ(log.Recent(), (std::vector<std::string>{"+2.0s two", "+3.0s three", "+4.0s four"}));
}

TEST(EventLogTest, WorksWithoutASink) {
  EventLog log(absl::FromUnixSeconds(0), 10, nullptr);
  Completions out;
  log.Add(absl::FromUnixSeconds(1), "x", &out);
  EXPECT_EQ(out.size(), 0u);
  EXPECT_EQ(log.Recent(), (std::vector<std::string>{"+1.0s x"}));
}

}  // namespace
}  // namespace ddp
