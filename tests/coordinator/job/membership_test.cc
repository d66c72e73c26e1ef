#include "coordinator/job/membership.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

WorkerIdentity Who(int node, int local, int lws, int pid, std::string nonce = "n") {
  WorkerIdentity w;
  w.host = absl::StrCat("host", node);
  w.node_rank = node;
  w.local_rank = local;
  w.local_world_size = lws;
  w.pid = pid;
  w.nonce = std::move(nonce);
  return w;
}

// Joins everyone, completing the world when it fills; returns the replies by index.
std::vector<absl::StatusOr<RankAssignment>> JoinAll(Membership& m,
                                                    const std::vector<WorkerIdentity>& who,
                                                    absl::Status refusal = absl::OkStatus()) {
  std::vector<absl::StatusOr<RankAssignment>> out(who.size(), absl::UnknownError("no reply"));
  Completions done;
  for (size_t i = 0; i < who.size(); ++i) {
    Membership::RegisterCallback cb = [&out, i](absl::StatusOr<RankAssignment> r) { out[i] = r; };
    auto joined = m.Join(who[i], cb, refusal, &done);
    if (!joined.ok()) {
      out[i] = joined.status();
    } else if (joined->world_full) {
      m.Complete(&done);
    }
  }
  done.Run();
  return out;
}

TEST(MembershipTest, RanksFollowNodeThenLocalRankWhateverTheArrivalOrder) {
  struct Case {
    const char* name;
    std::vector<WorkerIdentity> arrivals;
    std::vector<int> want_ranks;
    int want_nodes;
  };
  const std::vector<Case> cases = {
      {"in order",
       {Who(0, 0, 2, 1), Who(0, 1, 2, 2), Who(1, 0, 2, 3), Who(1, 1, 2, 4)},
       {0, 1, 2, 3},
       2},
      {"reversed",
       {Who(1, 1, 2, 4), Who(1, 0, 2, 3), Who(0, 1, 2, 2), Who(0, 0, 2, 1)},
       {3, 2, 1, 0},
       2},
      {"shuffled 4x1",
       {Who(2, 0, 1, 1), Who(0, 0, 1, 2), Who(3, 0, 1, 3), Who(1, 0, 1, 4)},
       {2, 0, 3, 1},
       4},
      {"uneven nodes",
       {Who(1, 0, 1, 1), Who(0, 2, 3, 2), Who(0, 0, 3, 3), Who(0, 1, 3, 4)},
       {3, 2, 0, 1},
       2},
  };
  for (const Case& c : cases) {
    Membership m(static_cast<int>(c.arrivals.size()), "n", 7);
    auto replies = JoinAll(m, c.arrivals);
    ASSERT_TRUE(m.world_complete()) << c.name;
    EXPECT_EQ(m.num_nodes(), c.want_nodes) << c.name;
    for (size_t i = 0; i < replies.size(); ++i) {
      ASSERT_TRUE(replies[i].ok()) << c.name << ": " << replies[i].status();
      EXPECT_EQ(replies[i]->rank, c.want_ranks[i]) << c.name << " arrival " << i;
      EXPECT_EQ(replies[i]->generation, 7);
      EXPECT_EQ(replies[i]->num_nodes, c.want_nodes);
      EXPECT_EQ(m.RankOf(c.arrivals[i].node_rank, c.arrivals[i].local_rank), c.want_ranks[i]);
      EXPECT_TRUE(m.CheckWorker(c.want_ranks[i], c.arrivals[i].pid).ok());
    }
  }
}

TEST(MembershipTest, JoinOutcomes) {
  Membership m(2, "n", 0);
  Completions done;
  Membership::RegisterCallback cb = [](absl::StatusOr<RankAssignment>) {};
  struct Step {
    const char* name;
    WorkerIdentity who;
    absl::Status refusal;
    absl::StatusCode want;
  };
  const std::vector<Step> steps = {
      {"stale nonce", Who(0, 0, 2, 1, "old"), absl::OkStatus(),
       absl::StatusCode::kFailedPrecondition},
      {"first", Who(0, 0, 2, 1), absl::OkStatus(), absl::StatusCode::kOk},
      {"same process again", Who(0, 0, 2, 1), absl::OkStatus(), absl::StatusCode::kOk},
      {"same slot, other process", Who(0, 0, 2, 99), absl::OkStatus(),
       absl::StatusCode::kAlreadyExists},
      {"job failed", Who(0, 1, 2, 2), absl::AbortedError("job failed: x"),
       absl::StatusCode::kAborted},
  };
  for (const Step& s : steps) {
    cb = [](absl::StatusOr<RankAssignment>) {};
    EXPECT_EQ(m.Join(s.who, cb, s.refusal, &done).status().code(), s.want) << s.name;
  }
  EXPECT_EQ(m.registered(), 1);
  EXPECT_FALSE(m.world_complete());
}

TEST(MembershipTest, AfterCompletionARetryGetsItsRankAndNewcomersAreRefused) {
  Membership m(2, "", 0);  // no nonce: not checked
  auto first = JoinAll(m, {Who(0, 0, 2, 11, "anything"), Who(0, 1, 2, 12)});
  ASSERT_TRUE(first[1].ok());
  auto again = JoinAll(m, {Who(0, 1, 2, 12), Who(0, 1, 2, 13), Who(5, 0, 1, 14)});
  ASSERT_TRUE(again[0].ok()) << again[0].status();
  EXPECT_EQ(again[0]->rank, 1);
  EXPECT_TRUE(absl::IsAlreadyExists(again[1].status()));
  EXPECT_TRUE(absl::IsResourceExhausted(again[2].status()));
}

TEST(MembershipTest, FailWaitersAnswersEveryQueuedRegistration) {
  std::vector<absl::Status> got;
  Membership m2(2, "n", 0);
  Completions done;
  for (int i = 0; i < 2; ++i) {  // two calls from one process (a retry), one slot
    Membership::RegisterCallback cb = [&got](absl::StatusOr<RankAssignment> r) {
      got.push_back(r.status());
    };
    ASSERT_TRUE(m2.Join(Who(0, 0, 2, 1), cb, absl::OkStatus(), &done).ok());
  }
  done.Run();
  EXPECT_TRUE(got.empty()) << "no reply while the world is incomplete";
  m2.FailWaiters(absl::DeadlineExceededError("registration timed out"), &done);
  done.Run();
  ASSERT_EQ(got.size(), 2u);
  for (const absl::Status& s : got) EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
}

TEST(MembershipTest, MissingWorkersNamesTheGap) {
  struct Case {
    const char* name;
    int world;
    std::vector<WorkerIdentity> joined;
    const char* want;
  };
  const std::vector<Case> cases = {
      {"nobody", 4, {}, "0 of 4 workers registered; no worker contacted the coordinator"},
      {"one node missing",
       4,
       {Who(0, 0, 2, 1), Who(0, 1, 2, 2)},
       "2 of 4 workers registered; missing node 1 local ranks 0,1"},
      {"one worker missing",
       4,
       {Who(0, 0, 2, 1), Who(0, 1, 2, 2), Who(1, 1, 2, 4)},
       "3 of 4 workers registered; missing node 1 (host1) local rank 0"},
      {"layout unknown",
       4,
       {Who(0, 0, 2, 1), Who(1, 0, 1, 2)},
       "2 of 4 workers registered; 2 missing; nodes heard from: 0,1"},
  };
  for (const Case& c : cases) {
    Membership m(c.world, "n", 0);
    JoinAll(m, c.joined);
    EXPECT_EQ(m.MissingWorkers(), c.want) << c.name;
  }
}

TEST(MembershipTest, CheckWorkerAndDescriptions) {
  Membership m(2, "n", 0);
  EXPECT_TRUE(absl::IsFailedPrecondition(m.CheckWorker(0, 1)));
  JoinAll(m, {Who(0, 0, 1, 10), Who(1, 0, 1, 11)});
  EXPECT_TRUE(m.CheckWorker(1, 11).ok());
  EXPECT_TRUE(absl::IsPermissionDenied(m.CheckWorker(1, 999)));
  EXPECT_TRUE(absl::IsInvalidArgument(m.CheckWorker(2, 11)));
  EXPECT_TRUE(absl::IsInvalidArgument(m.CheckWorker(-1, 11)));
  EXPECT_EQ(m.Describe(1), "rank 1 (host host1, node 1, local rank 0, pid 11)");
  EXPECT_EQ(Membership::DescribeWorker(Who(1, 0, 1, 11)),
            "worker (host host1, node 1, local rank 0, pid 11)");
  EXPECT_EQ(m.RankTable(),
            (std::vector<std::string>{"rank 0 = node 0 local 0 (host host0, pid 10)",
                                      "rank 1 = node 1 local 0 (host host1, pid 11)"}));
  EXPECT_EQ(m.RankOf(7, 0), -1);
}

}  // namespace
}  // namespace ddp
