#include "coordinator/job/exit_orders.h"

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/job/published.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

TEST(ExitOrdersTest, OrdersByRankAndPid) {
  struct Step {
    const char* name;
    enum { kOrder, kClear } what;
    int rank;
    int pid;
    std::string reason;
    bool want_ordered;  // for kOrder
    int want_pending;
  };
  const std::vector<Step> steps = {
      {"first order", Step::kOrder, 3, 103, "stalled in data", true, 1},
      {"again: the first reason stays", Step::kOrder, 3, 103, "later", false, 1},
      {"another rank", Step::kOrder, 1, 101, "stalled in forward", true, 2},
      {"a replacement in rank 3 is a new worker", Step::kOrder, 3, 203, "stalled again", true, 2},
      {"a new generation", Step::kClear, 0, 0, "", false, 0},
      {"after the clear", Step::kOrder, 3, 203, "stalled once more", true, 1},
  };
  ExitOrders o;
  for (const Step& s : steps) {
    if (s.what == Step::kOrder) {
      EXPECT_EQ(o.Order(s.rank, s.pid, s.reason), s.want_ordered) << s.name;
    } else {
      o.Clear();
    }
    EXPECT_EQ(o.pending(), s.want_pending) << s.name;
  }
  struct Ask {
    int rank;
    int pid;
    std::optional<std::string> want;
  };
  const std::vector<Ask> asks = {
      {3, 203, "stalled once more"},
      {3, 103, std::nullopt},  // the worker it replaced
      {1, 101, std::nullopt},  // cleared
      {0, 100, std::nullopt},
  };
  for (const Ask& a : asks) EXPECT_EQ(o.For(a.rank, a.pid), a.want) << a.rank << "/" << a.pid;
}

TEST(ExitOrdersTest, ReadsWhileOrdersChange) {
  ExitOrders o;
  std::thread writer([&] {
    for (int i = 0; i < 1000; ++i) {
      o.Order(i % 8, 100 + i % 8, "stalled");
      if (i % 100 == 99) o.Clear();
    }
  });
  int seen = 0;
  for (int i = 0; i < 1000; ++i) seen += o.For(i % 8, 100 + i % 8).has_value() ? 1 : 0;
  writer.join();
  EXPECT_LE(seen, 1000);
}

TEST(PublishedTest, CommandGenerationAndVersions) {
  Published p;
  EXPECT_EQ(p.command(), Command::kContinue);
  EXPECT_EQ(p.generation(), 0);
  struct Step {
    bool major;
    uint64_t want_version;
    uint64_t want_major;
  };
  const std::vector<Step> steps = {{false, 1, 0}, {true, 2, 1}, {false, 3, 1}, {true, 4, 2}};
  for (const Step& s : steps) {
    if (s.major) {
      p.Changed();
    } else {
      p.Touched();
    }
    EXPECT_EQ(p.version(), s.want_version);
    EXPECT_EQ(p.major_version(), s.want_major);
  }
  p.set_command(Command::kExit);
  p.Announce(3);
  EXPECT_EQ(p.command(), Command::kExit);
  EXPECT_EQ(p.generation(), 3);
  EXPECT_TRUE(p.exit_orders().Order(0, 7, "why"));
  EXPECT_EQ(p.exit_orders().pending(), 1);
}

}  // namespace
}  // namespace ddp
