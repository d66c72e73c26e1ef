#include "trainer/launcher/standby.h"

#include <cmath>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

using Verdict = StandbyWatch::Verdict;

constexpr absl::Duration kTimeout = absl::Seconds(10);
const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

absl::Time At(double seconds) { return kT0 + absl::Milliseconds(std::llround(seconds * 1000)); }

// What a probe sees: the dist_file names the coordinator of (epoch, incarnation) on `node`.
CoordinatorSighting Seen(bool answered, int64_t epoch = 0, int64_t incarnation = 0, int node = 0) {
  CoordinatorSighting s;
  s.file = true;
  s.epoch = epoch;
  s.incarnation = incarnation;
  s.coordinator_node = node;
  s.answered = answered;
  if (!answered) s.error = "connection refused";
  return s;
}

TEST(StandbyWatchTest, StandbyOfIsTheNextNodeWrappingAround) {
  EXPECT_EQ(StandbyWatch::StandbyOf(0, 2), 1);
  EXPECT_EQ(StandbyWatch::StandbyOf(1, 2), 0);
  EXPECT_EQ(StandbyWatch::StandbyOf(0, 3), 1);
  EXPECT_EQ(StandbyWatch::StandbyOf(1, 3), 2);
  EXPECT_EQ(StandbyWatch::StandbyOf(2, 3), 0);
  // One node (or none, or no coordinator node): no standby.
  EXPECT_EQ(StandbyWatch::StandbyOf(0, 1), -1);
  EXPECT_EQ(StandbyWatch::StandbyOf(0, 0), -1);
  EXPECT_EQ(StandbyWatch::StandbyOf(-1, 3), -1);
}

// Only the node after the coordinator's watches: every other node is idle, whatever it sees.
TEST(StandbyWatchTest, NodesThatAreNotTheStandbyStayIdle) {
  StandbyWatch node0(0, 3, kTimeout);
  StandbyWatch node2(2, 3, kTimeout);
  for (StandbyWatch* w : {&node0, &node2}) {
    EXPECT_EQ(w->Observe(At(0), Seen(true)), Verdict::kIdle);
    EXPECT_EQ(w->Observe(At(1), Seen(false)), Verdict::kIdle);
    EXPECT_EQ(w->Observe(At(100), Seen(false)), Verdict::kIdle);
  }
  // A job of one node has no standby at all.
  StandbyWatch single(0, 1, kTimeout);
  EXPECT_EQ(single.Observe(At(0), Seen(true)), Verdict::kIdle);
  EXPECT_EQ(single.Observe(At(100), Seen(false)), Verdict::kIdle);
}

// A coordinator that has never answered is a job still starting: the standby never takes it
// over, however long it stays silent.
TEST(StandbyWatchTest, NeverTakesOverBeforeTheFirstAnswer) {
  StandbyWatch w(1, 2, kTimeout);
  EXPECT_EQ(w.Observe(At(0), Seen(false)), Verdict::kIdle);
  EXPECT_EQ(w.Observe(At(5), Seen(false)), Verdict::kIdle);
  EXPECT_EQ(w.Observe(At(1000), Seen(false)), Verdict::kIdle);
  // Once it answers, the watch starts.
  EXPECT_EQ(w.Observe(At(1001), Seen(true)), Verdict::kHealthy);
  EXPECT_EQ(w.Observe(At(1002), Seen(false)), Verdict::kSilent);
}

// Until its first answer the standby is probed often; a node that is not the standby, or a job
// that ended, is not.
TEST(StandbyWatchTest, OnlyTheStandbyAwaitsTheFirstAnswer) {
  StandbyWatch standby(1, 2, kTimeout);
  EXPECT_TRUE(standby.AwaitingFirstAnswer()) << "nothing seen yet";
  CoordinatorSighting no_file;
  EXPECT_EQ(standby.Observe(At(0), no_file), Verdict::kIdle);
  EXPECT_TRUE(standby.AwaitingFirstAnswer()) << "no dist_file yet";
  EXPECT_EQ(standby.Observe(At(0.1), Seen(false)), Verdict::kIdle);
  EXPECT_TRUE(standby.AwaitingFirstAnswer());
  EXPECT_EQ(standby.Observe(At(0.2), Seen(true)), Verdict::kHealthy);
  EXPECT_FALSE(standby.AwaitingFirstAnswer());
  StandbyWatch other(0, 3, kTimeout);
  EXPECT_EQ(other.Observe(At(0), Seen(false)), Verdict::kIdle);
  EXPECT_FALSE(other.AwaitingFirstAnswer()) << "node 0 is not node 0's standby";
  StandbyWatch ended(1, 2, kTimeout);
  CoordinatorSighting gone = Seen(false);
  gone.job_ended = true;
  EXPECT_EQ(ended.Observe(At(0), gone), Verdict::kIdle);
  EXPECT_FALSE(ended.AwaitingFirstAnswer());
}

TEST(StandbyWatchTest, SilenceForTheFailoverTimeoutTakesOver) {
  StandbyWatch w(1, 2, kTimeout);
  EXPECT_EQ(w.Observe(At(0), Seen(true)), Verdict::kHealthy);
  EXPECT_EQ(w.Observe(At(3), Seen(true)), Verdict::kHealthy);
  // Silent from t=3 on: the clock runs from the last answer.
  EXPECT_EQ(w.Observe(At(4), Seen(false)), Verdict::kSilent);
  EXPECT_EQ(w.Observe(At(12.9), Seen(false)), Verdict::kSilent);
  EXPECT_EQ(w.silent_for(At(12.9)), absl::Milliseconds(9900));
  EXPECT_EQ(w.Observe(At(13), Seen(false)), Verdict::kTakeOver);
  EXPECT_EQ(w.next_epoch(), 1);
  EXPECT_EQ(w.lost_node(), 0);
  EXPECT_EQ(w.last_answer(), At(3));
  EXPECT_EQ(w.silent_for(At(13)), kTimeout);
}

// An answer restarts the clock: silences that add up past the timeout do not take over.
TEST(StandbyWatchTest, AnAnswerRestartsTheSilenceClock) {
  StandbyWatch w(1, 2, kTimeout);
  EXPECT_EQ(w.Observe(At(0), Seen(true)), Verdict::kHealthy);
  EXPECT_EQ(w.Observe(At(9), Seen(false)), Verdict::kSilent);
  EXPECT_EQ(w.Observe(At(9.5), Seen(true)), Verdict::kHealthy);
  EXPECT_EQ(w.Observe(At(19), Seen(false)), Verdict::kSilent);
  EXPECT_EQ(w.Observe(At(19.5), Seen(false)), Verdict::kTakeOver);
  EXPECT_EQ(w.last_answer(), At(9.5));
}

// The whole job suspended for longer than the timeout (scontrol suspend): the standby was not
// running either, so the silence counts from its resumption, and a coordinator that answers
// within the timeout after it is healthy; one that stays silent is taken over a timeout later.
TEST(StandbyWatchTest, TimeTheStandbyDidNotRunIsNoSilence) {
  StandbyWatch w(1, 2, kTimeout);
  EXPECT_EQ(w.Observe(At(0), Seen(true)), Verdict::kHealthy);
  w.Resumed(At(60));  // stopped from 0.5 s to 60 s
  EXPECT_EQ(w.Observe(At(60), Seen(false)), Verdict::kSilent);
  EXPECT_EQ(w.Observe(At(61), Seen(true)), Verdict::kHealthy);

  StandbyWatch lost(1, 2, kTimeout);
  EXPECT_EQ(lost.Observe(At(0), Seen(true)), Verdict::kHealthy);
  lost.Resumed(At(60));
  EXPECT_EQ(lost.Observe(At(60), Seen(false)), Verdict::kSilent);
  EXPECT_EQ(lost.Observe(At(69.9), Seen(false)), Verdict::kSilent);
  EXPECT_EQ(lost.Observe(At(70), Seen(false)), Verdict::kTakeOver);
  EXPECT_EQ(lost.last_answer(), At(0));
}

// Task 0 restarting its coordinator from the journal republishes with a newer incarnation: that
// restarts the clock, so a restart inside the timeout never triggers a takeover.
TEST(StandbyWatchTest, ANewerIncarnationRestartsTheSilenceClock) {
  StandbyWatch w(1, 2, kTimeout);
  EXPECT_EQ(w.Observe(At(0), Seen(true, 0, 0)), Verdict::kHealthy);
  EXPECT_EQ(w.Observe(At(8), Seen(false, 0, 0)), Verdict::kSilent);
  // The restarted coordinator has published, but does not answer yet.
  EXPECT_EQ(w.Observe(At(9), Seen(false, 0, 1)), Verdict::kSilent);
  EXPECT_EQ(w.Observe(At(11), Seen(false, 0, 1)), Verdict::kSilent);
  EXPECT_EQ(w.Observe(At(18.9), Seen(false, 0, 1)), Verdict::kSilent);
  // The same incarnation seen again does not restart it: ten seconds after the republish.
  EXPECT_EQ(w.Observe(At(19), Seen(false, 0, 1)), Verdict::kTakeOver);
  EXPECT_EQ(w.next_epoch(), 1);
  EXPECT_EQ(w.lost_node(), 0);
  EXPECT_EQ(w.last_answer(), At(0));
}

// A coordinator that ended the job removes the dist_file and writes the result file: no
// takeover then, and the watch starts over (a first answer is needed again).
TEST(StandbyWatchTest, NoTakeOverOnceTheJobEndedOrTheFileIsGone) {
  StandbyWatch w(1, 2, kTimeout);
  EXPECT_EQ(w.Observe(At(0), Seen(true)), Verdict::kHealthy);
  CoordinatorSighting ended = Seen(false);
  ended.job_ended = true;
  EXPECT_EQ(w.Observe(At(5), ended), Verdict::kIdle);
  EXPECT_EQ(w.Observe(At(50), ended), Verdict::kIdle);
  EXPECT_EQ(w.Observe(At(51), Seen(false)), Verdict::kIdle);

  StandbyWatch v(1, 2, kTimeout);
  EXPECT_EQ(v.Observe(At(0), Seen(true)), Verdict::kHealthy);
  CoordinatorSighting gone;  // the file could not be read
  gone.error = "no dist_file";
  EXPECT_EQ(v.Observe(At(5), gone), Verdict::kIdle);
  EXPECT_EQ(v.Observe(At(50), gone), Verdict::kIdle);
  EXPECT_EQ(v.Observe(At(51), Seen(false)), Verdict::kIdle);
}

// After node 1 took the job over (epoch 1, coordinator on node 1), node 2 of 3 is its standby
// and node 0 is not; when node 2 takes over in turn (epoch 2), node 0 (a spare that took node
// 0's place) watches node 2.
TEST(StandbyWatchTest, TheStandbyFollowsTheCoordinatorAroundTheNodes) {
  StandbyWatch node0(0, 3, kTimeout);
  StandbyWatch node1(1, 3, kTimeout);
  StandbyWatch node2(2, 3, kTimeout);

  // Epoch 0 on node 0: node 1 watches, takes over.
  EXPECT_EQ(node1.Observe(At(0), Seen(true, 0, 0, 0)), Verdict::kHealthy);
  EXPECT_EQ(node2.Observe(At(0), Seen(true, 0, 0, 0)), Verdict::kIdle);
  EXPECT_EQ(node1.Observe(At(10), Seen(false, 0, 0, 0)), Verdict::kTakeOver);
  EXPECT_EQ(node1.next_epoch(), 1);
  EXPECT_EQ(node1.lost_node(), 0);
  node1.TookOver();

  // Epoch 1 on node 1: node 1 is the coordinator now (idle), node 2 its standby.
  EXPECT_EQ(node1.Observe(At(11), Seen(true, 1, 0, 1)), Verdict::kIdle);
  EXPECT_EQ(node0.Observe(At(11), Seen(true, 1, 0, 1)), Verdict::kIdle);
  EXPECT_EQ(node2.Observe(At(11), Seen(true, 1, 0, 1)), Verdict::kHealthy);
  EXPECT_EQ(node2.Observe(At(15), Seen(false, 1, 0, 1)), Verdict::kSilent);
  EXPECT_EQ(node0.Observe(At(30), Seen(false, 1, 0, 1)), Verdict::kIdle);
  EXPECT_EQ(node1.Observe(At(30), Seen(false, 1, 0, 1)), Verdict::kIdle);
  EXPECT_EQ(node2.Observe(At(21), Seen(false, 1, 0, 1)), Verdict::kTakeOver);
  EXPECT_EQ(node2.next_epoch(), 2);
  EXPECT_EQ(node2.lost_node(), 1);
  EXPECT_EQ(node2.last_answer(), At(11));
  node2.TookOver();

  // Epoch 2 on node 2: the standby wraps around to node 0.
  EXPECT_EQ(node2.Observe(At(22), Seen(true, 2, 0, 2)), Verdict::kIdle);
  EXPECT_EQ(node1.Observe(At(22), Seen(true, 2, 0, 2)), Verdict::kIdle);
  EXPECT_EQ(node0.Observe(At(22), Seen(true, 2, 0, 2)), Verdict::kHealthy);
  EXPECT_EQ(node0.Observe(At(31), Seen(false, 2, 0, 2)), Verdict::kSilent);
  EXPECT_EQ(node0.Observe(At(32), Seen(false, 2, 0, 2)), Verdict::kTakeOver);
  EXPECT_EQ(node0.next_epoch(), 3);
  EXPECT_EQ(node0.lost_node(), 2);
  EXPECT_EQ(node0.last_answer(), At(22));
}

// A coordinator of a takeover (epoch > 0) is watched from the moment its dist_file is seen, even
// before it answers: the job is running, and if that coordinator dies before it ever answers (its
// node lost right after the takeover), the next standby still takes over at the timeout.
TEST(StandbyWatchTest, ATakeoverCoordinatorIsWatchedBeforeItsFirstAnswer) {
  StandbyWatch node2(2, 3, kTimeout);
  EXPECT_EQ(node2.Observe(At(0), Seen(true, 0, 0, 0)), Verdict::kIdle);
  EXPECT_EQ(node2.Observe(At(1), Seen(false, 1, 0, 1)), Verdict::kSilent);
  EXPECT_EQ(node2.Observe(At(1 + 9.9), Seen(false, 1, 0, 1)), Verdict::kSilent);
  EXPECT_EQ(node2.Observe(At(11), Seen(false, 1, 0, 1)), Verdict::kTakeOver);
  EXPECT_EQ(node2.next_epoch(), 2);
  EXPECT_EQ(node2.lost_node(), 1);
}

// An answer still restarts the clock for a takeover coordinator.
TEST(StandbyWatchTest, ATakeoverCoordinatorThatAnswersIsHealthy) {
  StandbyWatch node2(2, 3, kTimeout);
  EXPECT_EQ(node2.Observe(At(1), Seen(false, 1, 0, 1)), Verdict::kSilent);
  EXPECT_EQ(node2.Observe(At(5), Seen(true, 1, 0, 1)), Verdict::kHealthy);
  EXPECT_EQ(node2.Observe(At(14), Seen(false, 1, 0, 1)), Verdict::kSilent);
  EXPECT_EQ(node2.Observe(At(15), Seen(false, 1, 0, 1)), Verdict::kTakeOver);
}

}  // namespace
}  // namespace ddp
