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
      m.Complete(GenerationNote{}, &done);
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

TEST(MembershipTest, ALargeJobsMissingListIsCut) {
  // 100 nodes of 2, node i's worker 0 only: every node misses local rank 1.
  std::vector<WorkerIdentity> joined;
  for (int node = 0; node < 100; ++node) joined.push_back(Who(node, 0, 2, 100 + node));
  Membership m(200, "n", 0);
  JoinAll(m, joined);
  EXPECT_EQ(m.registered(), 100);
  const std::string text = m.MissingWorkers();
  EXPECT_NE(text.find("missing node 0 (host0) local rank 1; node 1 (host1)"), std::string::npos);
  EXPECT_NE(text.find("node 31 (host31) local rank 1; and 68 more nodes"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("node 32 "), std::string::npos) << text;
  EXPECT_LT(text.size(), 4096u);
}

TEST(MembershipTest, RegisteredCountsOccupiedSlotsThroughVacateAndRejoin) {
  Membership m(3, "n", 0);
  JoinAll(m, {Who(0, 0, 1, 10), Who(1, 0, 1, 11), Who(2, 0, 1, 12)});
  EXPECT_EQ(m.registered(), 3);
  Completions out;
  m.BeginNext();
  m.Vacate(1, "lost", absl::AbortedError("lost"), &out);
  m.Vacate(1, "lost again", absl::AbortedError("lost"), &out);  // counted once
  EXPECT_EQ(m.registered(), 2);
  Membership::RegisterCallback cb = [](absl::StatusOr<RankAssignment>) {};
  ASSERT_TRUE(m.Rejoin(1, 5, cb).ok());  // the silent one was alive after all
  EXPECT_EQ(m.registered(), 3);
  m.Vacate(2, "lost", absl::AbortedError("lost"), &out);
  EXPECT_EQ(m.registered(), 2);
  EXPECT_EQ(m.RemoveNode(2), 1);  // dropping the vacant node's slot
  EXPECT_EQ(m.registered(), 2);
  out.Run();
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
  EXPECT_EQ(m.RankTableLines(),
            (std::vector<std::string>{"rank 0 = node 0 local 0 (host host0, pid 10)",
                                      "rank 1 = node 1 local 0 (host host1, pid 11)"}));
  EXPECT_EQ(m.RankOf(7, 0), -1);
}

// A recovery in a 2x2 job: rank 2's worker is lost, survivors rejoin with their steps, a new
// process takes the vacant slot; the next generation keeps the ranks, names the new pid, has its
// own store prefix and says that the state comes from peers.
TEST(MembershipTest, TheNextGenerationReplacesAVacantSlot) {
  Membership m(4, "n", 3);
  auto first = JoinAll(m, {Who(0, 0, 2, 10), Who(0, 1, 2, 11), Who(1, 0, 2, 12), Who(1, 1, 2, 13)});
  ASSERT_TRUE(first[2].ok());
  EXPECT_EQ(first[2]->membership_generation, 0);
  EXPECT_EQ(first[2]->store_prefix, "gen3/m0");
  EXPECT_FALSE(first[2]->state_from_peers);
  EXPECT_EQ(m.current(), 0);
  EXPECT_FALSE(m.forming_next());

  Completions done;
  m.BeginNext();
  EXPECT_TRUE(m.forming_next());
  EXPECT_EQ(m.forming(), 1);
  m.Vacate(2, "killed by signal 9", absl::AbortedError("lost"), &done);
  EXPECT_TRUE(m.vacant(1, 0));
  EXPECT_EQ(m.registered(), 3);
  EXPECT_TRUE(m.CheckWorker(2, 12).ok()) << "the published table changes only at completion";

  std::vector<absl::StatusOr<RankAssignment>> next(4, absl::UnknownError("no reply"));
  for (int r : {0, 1, 3}) {
    Membership::RegisterCallback cb = [&next, r](absl::StatusOr<RankAssignment> a) { next[r] = a; };
    auto complete = m.Rejoin(r, /*committed_step=*/r == 3 ? 41 : 40, cb);
    ASSERT_TRUE(complete.ok()) << complete.status();
    EXPECT_FALSE(*complete);
  }
  EXPECT_EQ(m.MissingMembers(),
            "rank 2 (node 1 local rank 0, replacement not registered; killed by signal 9)");
  // An occupied slot is refused to another process.
  Membership::RegisterCallback cb = [&next](absl::StatusOr<RankAssignment> a) { next[2] = a; };
  EXPECT_TRUE(
      absl::IsAlreadyExists(m.Join(Who(1, 1, 2, 99), cb, absl::OkStatus(), &done).status()));
  auto joined = m.Join(Who(1, 0, 2, 20), cb, absl::OkStatus(), &done);
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_TRUE(joined->new_slot);
  EXPECT_TRUE(joined->world_full);
  const std::vector<int> revived =
      m.Complete(GenerationNote{1, {2, FailureKind::kSignal, "x"}, 0.5}, &done);
  done.Run();
  EXPECT_EQ(revived, std::vector<int>{2});
  EXPECT_EQ(m.current(), 1);
  EXPECT_FALSE(m.forming_next());
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(next[r].ok()) << r << ": " << next[r].status();
    EXPECT_EQ(next[r]->rank, r);
    EXPECT_EQ(next[r]->world_size, 4);
    EXPECT_EQ(next[r]->membership_generation, 1);
    EXPECT_EQ(next[r]->store_prefix, "gen3/m1");
    EXPECT_TRUE(next[r]->state_from_peers);
    EXPECT_EQ(next[r]->restarts, 1);
    EXPECT_EQ(next[r]->recovery_cause.rank, 2);
  }
  EXPECT_TRUE(m.CheckWorker(2, 20).ok());
  EXPECT_TRUE(absl::IsPermissionDenied(m.CheckWorker(2, 12)));
}

TEST(MembershipTest, RejoinRulesAndFailedStarts) {
  Membership m(2, "", 0);
  JoinAll(m, {Who(0, 0, 2, 10), Who(0, 1, 2, 11)});
  Completions done;
  absl::Status got = absl::UnknownError("no reply");
  Membership::RegisterCallback cb = [&got](absl::StatusOr<RankAssignment> a) { got = a.status(); };
  // A rejoin before any recovery began is held (the owner waits for the loss).
  auto early = m.Rejoin(0, 5, cb);
  ASSERT_TRUE(early.ok());
  EXPECT_FALSE(*early);
  EXPECT_TRUE(absl::IsUnknown(got)) << "held, not answered";
  m.BeginNext();
  m.Vacate(1, "lost: no heartbeat", absl::AbortedError("lost"), &done);
  m.NoteFailedStart(0, 1, "exited with code 2");
  EXPECT_EQ(
      m.MissingMembers(),
      "rank 1 (node 0 local rank 1, replacement not registered; its start exited with code 2)");
  // The member declared lost by silence is alive after all: it may take its slot back.
  absl::Status back = absl::UnknownError("no reply");
  Membership::RegisterCallback cb2 = [&back](absl::StatusOr<RankAssignment> a) {
    back = a.status();
  };
  auto reclaimed = m.Rejoin(1, 5, cb2);
  ASSERT_TRUE(reclaimed.ok()) << reclaimed.status();
  EXPECT_TRUE(*reclaimed);
  EXPECT_EQ(m.Complete(GenerationNote{}, &done), std::vector<int>{1});
  done.Run();
  EXPECT_TRUE(got.ok()) << got;
  EXPECT_TRUE(back.ok()) << back;
  // Failing the waiters answers a held rejoin.
  absl::Status failed = absl::OkStatus();
  Membership::RegisterCallback cb3 = [&failed](absl::StatusOr<RankAssignment> a) {
    failed = a.status();
  };
  ASSERT_TRUE(m.Rejoin(1, 6, cb3).ok());
  m.FailWaiters(absl::AbortedError("job failed"), &done);
  done.Run();
  EXPECT_TRUE(absl::IsAborted(failed)) << failed;
  EXPECT_TRUE(absl::IsFailedPrecondition(m.Rejoin(7, 0, cb3).status()));
}

}  // namespace
}  // namespace ddp
