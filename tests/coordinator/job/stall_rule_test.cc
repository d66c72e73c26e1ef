#include "coordinator/job/stall_rule.h"

#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;

RankView View(int rank, StepPhase phase, double seconds, bool first_step = false,
              bool working = true) {
  RankView v;
  v.rank = rank;
  v.working = working;
  v.phase = phase;
  v.in_phase = absl::Seconds(seconds);
  v.first_step = first_step;
  return v;
}

constexpr StepPhase kData = StepPhase::kData;
constexpr StepPhase kWait = StepPhase::kAllreduce;

TEST(StallRuleTest, RoleOfEveryPhase) {
  EXPECT_EQ(RoleOf(StepPhase::kNone), PhaseRole::kUnknown);
  for (StepPhase p : {StepPhase::kData, StepPhase::kForward, StepPhase::kBackward,
                      StepPhase::kOptimizer, StepPhase::kCheckpoint, StepPhase::kEval}) {
    EXPECT_EQ(RoleOf(p), PhaseRole::kWorking) << StepPhaseName(p);
  }
  EXPECT_EQ(RoleOf(StepPhase::kAllreduce), PhaseRole::kWaiting);
  EXPECT_EQ(RoleOf(StepPhase::kRecovery), PhaseRole::kWaiting);
}

TEST(StallRuleTest, StepBudgetFollowsTheFlagOrThePace) {
  struct Case {
    const char* name;
    absl::Duration timeout;
    std::optional<absl::Duration> median;
    absl::Duration want;
  };
  const std::vector<Case> cases = {
      {"flag wins over the pace", absl::Seconds(5), absl::Seconds(10), absl::Seconds(5)},
      {"no pace yet: the floor", absl::ZeroDuration(), std::nullopt, absl::Seconds(60)},
      {"fast steps: the floor", absl::ZeroDuration(), absl::Milliseconds(100), absl::Seconds(60)},
      {"slow steps: 20x median", absl::ZeroDuration(), absl::Seconds(4), absl::Seconds(80)},
  };
  for (const Case& c : cases) {
    StallOptions o;
    o.timeout = c.timeout;
    EXPECT_EQ(StallRule(o).StepBudget(c.median), c.want) << c.name;
  }
}

TEST(StallRuleTest, LongPhasesGetTenTimesTheBudget) {
  StallOptions o;
  o.timeout = absl::Seconds(5);
  const StallRule rule(o);
  EXPECT_EQ(rule.BudgetFor(View(0, kData, 0), std::nullopt), absl::Seconds(5));
  EXPECT_EQ(rule.BudgetFor(View(0, StepPhase::kForward, 0, /*first_step=*/true), std::nullopt),
            absl::Seconds(50));
  EXPECT_EQ(rule.BudgetFor(View(0, StepPhase::kCheckpoint, 0), std::nullopt), absl::Seconds(50));
  EXPECT_EQ(rule.BudgetFor(View(0, StepPhase::kEval, 0), std::nullopt), absl::Seconds(50));
}

TEST(StallRuleTest, WhoIsStalled) {
  struct Case {
    const char* name;
    std::vector<RankView> ranks;
    std::vector<int> want;  // stalled ranks, longest first
  };
  // Budget 10 s (ordinary), 100 s (first step, checkpoint, eval).
  const std::vector<Case> cases = {
      {"one rank in data past the budget, peer waits",
       {View(0, kWait, 12), View(1, kData, 12)},
       {1}},
      {"within the budget", {View(0, kWait, 9), View(1, kData, 9.5)}, {}},
      {"the overlap counts: the peer only just started waiting",
       {View(0, kWait, 3), View(1, kData, 50)},
       {}},
      {"everyone works (a slow file system)", {View(0, kData, 50), View(1, kData, 50)}, {}},
      {"everyone waits (a network hang)", {View(0, kWait, 50), View(1, kWait, 50)}, {}},
      {"nothing reported is never judged", {View(0, kWait, 50), View(1, StepPhase::kNone, 50)}, {}},
      {"the waiting peer has finished", {View(0, kWait, 50, false, false), View(1, kData, 50)}, {}},
      {"a finished rank is not judged", {View(0, kWait, 50), View(1, kData, 50, false, false)}, {}},
      {"first step: ten times the budget",
       {View(0, kWait, 60), View(1, StepPhase::kForward, 60, true)},
       {}},
      {"first step past its own budget",
       {View(0, kWait, 101), View(1, StepPhase::kForward, 101, true)},
       {1}},
      {"rank 0 checkpointing while the others wait",
       {View(0, StepPhase::kCheckpoint, 60), View(1, kWait, 60), View(2, kWait, 60)},
       {}},
      {"a checkpoint that never ends",
       {View(0, StepPhase::kCheckpoint, 120), View(1, kWait, 120), View(2, kWait, 120)},
       {0}},
      {"eval past its budget", {View(0, StepPhase::kEval, 101), View(1, kWait, 101)}, {0}},
      {"peers waiting in recovery count",
       {View(0, StepPhase::kRecovery, 20), View(1, kData, 20)},
       {1}},
      {"two stuck ranks, longest first",
       {View(0, kData, 11), View(1, kWait, 30), View(2, StepPhase::kBackward, 25),
        View(3, kWait, 30)},
       {2, 0}},
      {"ties: lowest rank first",
       {View(0, kWait, 30), View(2, kData, 20), View(1, kData, 20)},
       {1, 2}},
  };
  StallOptions o;
  o.timeout = absl::Seconds(10);
  const StallRule rule(o);
  for (const Case& c : cases) {
    std::vector<int> got;
    for (const Stall& s : rule.Find(c.ranks, std::nullopt)) got.push_back(s.rank);
    EXPECT_EQ(got, c.want) << c.name;
  }
}

TEST(StallRuleTest, DerivedBudgetFromThePace) {
  const StallRule rule{StallOptions{}};  // max(60 s, 20 x median)
  const std::vector<RankView> ranks = {View(0, kWait, 70), View(1, kData, 70)};
  EXPECT_EQ(rule.Find(ranks, absl::Milliseconds(200)).size(), 1u);  // budget 60 s
  EXPECT_TRUE(rule.Find(ranks, absl::Seconds(4)).empty());          // budget 80 s
}

TEST(StallRuleTest, AStallSaysWhatThePeersDo) {
  StallOptions o;
  o.timeout = absl::Seconds(10);
  const std::vector<RankView> ranks = {View(0, kWait, 20), View(1, kData, 20), View(2, kWait, 20),
                                       View(3, StepPhase::kForward, 1),
                                       View(4, kWait, 20, false, /*working=*/false)};
  const std::vector<Stall> stalls = StallRule(o).Find(ranks, std::nullopt);
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_EQ(stalls[0].rank, 1);
  EXPECT_EQ(stalls[0].phase, kData);
  EXPECT_EQ(stalls[0].in_phase, absl::Seconds(20));
  EXPECT_EQ(stalls[0].budget, absl::Seconds(10));
  ASSERT_EQ(stalls[0].peers.size(), 2u);  // the finished rank 4 is not a peer
  EXPECT_EQ(stalls[0].peers[0].phase, StepPhase::kForward);
  EXPECT_EQ(stalls[0].peers[0].ranks, 1);
  EXPECT_EQ(stalls[0].peers[1].phase, kWait);
  EXPECT_EQ(stalls[0].peers[1].ranks, 2);
  EXPECT_EQ(DescribeStall(stalls[0], "rank 1 (host h)", "stalled"),
            "rank 1 (host h) stalled in data for 20.0s (budget 10s; peers: 1 in forward, 2 in "
            "allreduce)");
}

TEST(StallRuleTest, HoldoutsOfAStop) {
  struct Case {
    const char* name;
    std::vector<RankView> ranks;
    std::vector<int> want;
  };
  const std::vector<Case> cases = {
      {"the rank that works while the other waits", {View(0, kWait, 1), View(1, kData, 0.5)}, {1}},
      {"everyone waits: all of them", {View(0, kWait, 5), View(1, kWait, 6)}, {1, 0}},
      {"nothing reported: all working ranks",
       {View(0, StepPhase::kNone, 1), View(1, kWait, 2, false, false)},
       {0}},
      {"all finished: nobody", {View(0, kWait, 1, false, false)}, {}},
  };
  for (const Case& c : cases) {
    std::vector<int> got;
    for (const Stall& s : StallRule::Holdouts(c.ranks)) {
      got.push_back(s.rank);
      EXPECT_EQ(s.budget, absl::ZeroDuration()) << c.name;
    }
    EXPECT_EQ(got, c.want) << c.name;
  }
  const std::vector<Stall> h = StallRule::Holdouts({View(0, kWait, 5), View(1, kData, 75)});
  ASSERT_EQ(h.size(), 1u);
  EXPECT_THAT(DescribeStall(h[0], "rank 1", "stuck"),
              HasSubstr("rank 1 stuck in data for 75.0s (peers: 1 in allreduce)"));
}

}  // namespace
}  // namespace ddp
