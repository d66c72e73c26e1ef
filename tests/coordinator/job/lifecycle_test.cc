#include "coordinator/job/lifecycle.h"

#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/exit_codes.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

const FailureCause kLost{2, FailureKind::kSignal, "rank 2 killed by signal 9"};

// Drives a fresh lifecycle to `state` through its public moves.
Lifecycle At(JobState state) {
  Lifecycle l;
  switch (state) {
    case JobState::kRegistering:
      break;
    case JobState::kRunning:
      l.Start();
      break;
    case JobState::kRecovering:
      l.Start();
      l.BeginRecovery();
      break;
    case JobState::kStopping:
      l.Start();
      l.RequestStop("why");
      break;
    case JobState::kStopped:
      l.Start();
      l.RequestStop("why");
      l.FinishStop();
      break;
    case JobState::kSucceeded:
      l.Start();
      l.Succeed();
      break;
    case JobState::kFailed:
      l.Fail(kLost, absl::InfinitePast());
      break;
  }
  EXPECT_EQ(l.state(), state);
  return l;
}

TEST(LifecycleTest, TheTransitionTable) {
  const std::set<std::pair<JobState, JobState>> allowed = {
      {JobState::kRegistering, JobState::kRunning}, {JobState::kRegistering, JobState::kFailed},
      {JobState::kRunning, JobState::kRecovering},  {JobState::kRunning, JobState::kStopping},
      {JobState::kRunning, JobState::kSucceeded},   {JobState::kRunning, JobState::kFailed},
      {JobState::kRecovering, JobState::kRunning},  {JobState::kRecovering, JobState::kStopping},
      {JobState::kRecovering, JobState::kFailed},   {JobState::kStopping, JobState::kStopped},
      {JobState::kStopping, JobState::kFailed},     {JobState::kStopping, JobState::kRecovering},
  };
  for (JobState from : kAllJobStates) {
    for (JobState to : kAllJobStates) {
      EXPECT_EQ(Lifecycle::Allowed(from, to), allowed.count({from, to}) == 1)
          << JobStateName(from) << " -> " << JobStateName(to);
    }
    if (IsTerminal(from)) {
      for (JobState to : kAllJobStates) EXPECT_FALSE(Lifecycle::Allowed(from, to));
    }
  }
}

TEST(LifecycleTest, MovesFromEveryReachableState) {
  struct Move {
    const char* name;
    std::function<bool(Lifecycle&)> apply;
    JobState target;
  };
  const std::vector<Move> moves = {
      {"Start", [](Lifecycle& l) { return l.Start(); }, JobState::kRunning},
      {"Succeed", [](Lifecycle& l) { return l.Succeed(); }, JobState::kSucceeded},
      {"FinishStop", [](Lifecycle& l) { return l.FinishStop(); }, JobState::kStopped},
      {"Fail", [](Lifecycle& l) { return l.Fail(kLost, absl::InfinitePast()); }, JobState::kFailed},
      {"BeginRecovery", [](Lifecycle& l) { return l.BeginRecovery(); }, JobState::kRecovering},
  };
  for (JobState from : kAllJobStates) {
    for (const Move& m : moves) {
      Lifecycle l = At(from);
      const bool want = Lifecycle::Allowed(from, m.target);
      EXPECT_EQ(m.apply(l), want) << m.name << " from " << JobStateName(from);
      EXPECT_EQ(l.state(), want ? m.target : from) << m.name << " from " << JobStateName(from);
    }
  }
}

TEST(LifecycleTest, CommandAndExitCodePerState) {
  struct Case {
    JobState state;
    Command command;
    int exit_code;
  };
  const std::vector<Case> cases = {
      {JobState::kRegistering, Command::kContinue, kExitFailed},
      {JobState::kRunning, Command::kContinue, kExitFailed},
      {JobState::kRecovering, Command::kContinue, kExitFailed},
      {JobState::kStopping, Command::kCheckpointAndStop, kExitFailed},
      {JobState::kStopped, Command::kCheckpointAndStop, kExitResumable},
      {JobState::kSucceeded, Command::kContinue, kExitOk},
      {JobState::kFailed, Command::kAbort, kExitFailed},
  };
  for (const Case& c : cases) {
    Lifecycle l = At(c.state);
    EXPECT_EQ(l.command(), c.command) << JobStateName(c.state);
    EXPECT_EQ(l.ExitCode(), c.exit_code) << JobStateName(c.state);
    EXPECT_EQ(l.finished(), IsTerminal(c.state));
  }
}

TEST(LifecycleTest, StopReasonAndFailureStayApart) {
  Lifecycle l = At(JobState::kRunning);
  EXPECT_TRUE(l.RequestStop("maintenance"));
  EXPECT_TRUE(l.RequestStop("second request"));  // already stopping: the first reason stays
  EXPECT_EQ(l.stop_reason(), "maintenance");
  EXPECT_TRUE(l.failure().empty());
  EXPECT_TRUE(l.Fail(kLost, absl::InfinitePast()));
  EXPECT_EQ(l.stop_reason(), "maintenance");
  EXPECT_EQ(l.failure().rank, 2);
  // The first failure stands.
  EXPECT_FALSE(l.Fail({5, FailureKind::kWorkerError, "later"}, absl::InfinitePast()));
  EXPECT_EQ(l.failure().rank, 2);
  Lifecycle registering;
  EXPECT_FALSE(registering.RequestStop("too early"));
  EXPECT_EQ(registering.state(), JobState::kRegistering);
}

TEST(LifecycleTest, ARecoveryEndsWhereTheJobWasHeading) {
  struct Case {
    const char* name;
    std::function<void(Lifecycle&)> drive;  // from RUNNING to the end of one recovery
    JobState want;
    Command command_during;
  };
  const std::vector<Case> cases = {
      {"plain", [](Lifecycle& l) { l.BeginRecovery(); }, JobState::kRunning, Command::kContinue},
      {"stop asked during it",
       [](Lifecycle& l) {
         l.BeginRecovery();
         EXPECT_TRUE(l.RequestStop("preempted"));
         EXPECT_EQ(l.state(), JobState::kRecovering) << "the stop waits for the recovery";
       },
       JobState::kStopping, Command::kCheckpointAndStop},
      {"begun while stopping",
       [](Lifecycle& l) {
         l.RequestStop("preempted");
         EXPECT_TRUE(l.BeginRecovery());
       },
       JobState::kStopping, Command::kCheckpointAndStop},
  };
  for (const Case& c : cases) {
    Lifecycle l = At(JobState::kRunning);
    c.drive(l);
    EXPECT_EQ(l.state(), JobState::kRecovering) << c.name;
    EXPECT_EQ(l.command(), c.command_during) << c.name;
    EXPECT_TRUE(l.EndRecovery()) << c.name;
    EXPECT_EQ(l.state(), c.want) << c.name;
    EXPECT_FALSE(l.EndRecovery()) << c.name << ": no recovery left to end";
  }
  Lifecycle failed = At(JobState::kFailed);
  EXPECT_FALSE(failed.BeginRecovery());
}

TEST(LifecycleTest, ReattributionOnlyWithinTheWindowAndForAnotherRank) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  const FailureCause peer{0, FailureKind::kCollectiveError, "rank 0 failed: reset"};
  const FailureCause death{1, FailureKind::kSignal, "rank 1 killed by signal 9"};
  struct Case {
    const char* name;
    absl::Time revisable_until;
    FailureCause root;
    absl::Time at;
    bool want;
  };
  const std::vector<Case> cases = {
      {"within the window", t0 + absl::Seconds(5), death, t0 + absl::Seconds(1), true},
      {"at the window's end", t0 + absl::Seconds(5), death, t0 + absl::Seconds(5), true},
      {"after the window", t0 + absl::Seconds(5), death, t0 + absl::Seconds(6), false},
      {"final failure", absl::InfinitePast(), death, t0, false},
      {"same rank", t0 + absl::Seconds(5), {0, FailureKind::kSignal, "rank 0 killed"}, t0, false},
  };
  for (const Case& c : cases) {
    Lifecycle l;
    l.Start();
    ASSERT_TRUE(l.Fail(peer, c.revisable_until));
    EXPECT_EQ(l.Reattribute(c.root, c.at), c.want) << c.name;
    EXPECT_EQ(l.failure().rank, c.want ? c.root.rank : 0) << c.name;
    if (c.want) {
      EXPECT_EQ(l.failure().kind, FailureKind::kSignal);
      EXPECT_EQ(l.failure().text, "rank 1 killed by signal 9; then rank 0 failed: reset");
      EXPECT_FALSE(l.Reattribute({3, FailureKind::kSignal, "x"}, c.at)) << "revised only once";
    }
  }
  Lifecycle running;
  running.Start();
  EXPECT_FALSE(running.Reattribute(death, t0)) << "nothing failed";
}

TEST(LifecycleTest, RanksDoneEndTheJobWhereItWasHeading) {
  struct Case {
    JobState from;
    int ranks;
    JobState want;  // once every rank is done
  };
  const std::vector<Case> cases = {
      {JobState::kRunning, 3, JobState::kSucceeded},
      {JobState::kStopping, 2, JobState::kStopped},
      {JobState::kRecovering, 2, JobState::kRecovering},  // no move from there
      {JobState::kFailed, 1, JobState::kFailed},
  };
  for (const Case& c : cases) {
    Lifecycle l = At(c.from);
    for (int i = 1; i < c.ranks; ++i) {
      EXPECT_FALSE(l.RankDone(c.ranks)) << JobStateName(c.from);
      EXPECT_EQ(l.state(), c.from);
    }
    EXPECT_EQ(l.RankDone(c.ranks), c.want != c.from) << JobStateName(c.from);
    EXPECT_EQ(l.state(), c.want) << JobStateName(c.from);
    EXPECT_EQ(l.ranks_done(), c.ranks);
  }
}

TEST(LifecycleTest, TimesAndSuspensions) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  auto at = [&](double s) { return t0 + absl::Seconds(s); };
  Lifecycle l(t0);
  EXPECT_EQ(l.start(), t0);
  EXPECT_EQ(l.running_since(), absl::InfiniteFuture());
  EXPECT_EQ(l.stopping_since(), absl::InfiniteFuture());
  struct Step {
    const char* name;
    std::function<void(Lifecycle&)> act;
    double now;
    double want_registration_age;
    double want_running_since;   // -1: InfiniteFuture
    double want_stopping_since;  // -1: InfiniteFuture
    bool want_stop_overdue;      // with a 60 s stop timeout
  };
  const std::vector<Step> steps = {
      {"registering", [](Lifecycle&) {}, 10, 10, -1, -1, false},
      {"suspended while registering", [](Lifecycle& x) { x.Suspended(absl::Seconds(4)); }, 12, 8,
       -1, -1, false},
      {"running",
       [&](Lifecycle& x) {
         x.Start();
         x.Stamp(at(20));
       },
       20, 16, 20, -1, false},
      {"a suspension while running leaves the registration's age alone",
       [](Lifecycle& x) { x.Suspended(absl::Seconds(3)); }, 25, 21, 20, -1, false},
      {"stopping",
       [&](Lifecycle& x) {
         x.RequestStop("preempted");
         x.Stamp(at(30));
       },
       30, 26, 20, 30, false},
      {"a later stamp keeps the first", [&](Lifecycle& x) { x.Stamp(at(40)); }, 40, 36, 20, 30,
       false},
      {"overdue after the timeout", [](Lifecycle&) {}, 91, 87, 20, 30, true},
      {"a suspension moves the stop's start", [](Lifecycle& x) { x.Suspended(absl::Seconds(5)); },
       91, 87, 20, 35, false},
  };
  for (const Step& s : steps) {
    s.act(l);
    EXPECT_EQ(l.RegistrationAge(at(s.now)), absl::Seconds(s.want_registration_age)) << s.name;
    EXPECT_EQ(l.running_since(),
              s.want_running_since < 0 ? absl::InfiniteFuture() : at(s.want_running_since))
        << s.name;
    EXPECT_EQ(l.stopping_since(),
              s.want_stopping_since < 0 ? absl::InfiniteFuture() : at(s.want_stopping_since))
        << s.name;
    EXPECT_EQ(l.StopOverdue(at(s.now), absl::Seconds(60)), s.want_stop_overdue) << s.name;
  }
}

TEST(LifecycleTest, AStopThatCannotCompleteOrdersEveryRankToExit) {
  struct Case {
    const char* name;
    bool resumable;
    JobState want;
    int want_exit_code;
    std::string want_note;
  };
  const std::vector<Case> cases = {
      {"with a checkpoint", true, JobState::kStopped, kExitResumable,
       "stop not completed; resumable from the checkpoint of step 40"},
      {"without one", false, JobState::kFailed, kExitFailed, ""},
  };
  for (const Case& c : cases) {
    Lifecycle l = At(JobState::kStopping);
    EXPECT_FALSE(l.exit_ordered());
    EXPECT_EQ(l.exit_code(), 0);
    EXPECT_EQ(l.command(), Command::kCheckpointAndStop);
    if (c.resumable) {
      EXPECT_TRUE(l.EndStopResumable(c.want_note)) << c.name;
    } else {
      l.OrderExit("stop not completed; no checkpoint to resume from");
      EXPECT_TRUE(l.Fail(kLost, absl::InfinitePast())) << c.name;
    }
    EXPECT_EQ(l.state(), c.want) << c.name;
    EXPECT_TRUE(l.exit_ordered()) << c.name;
    EXPECT_EQ(l.command(), Command::kExit) << c.name << ": whatever the state";
    EXPECT_EQ(l.exit_code(), c.want_exit_code) << c.name;
    EXPECT_EQ(l.stop_note(), c.want_note) << c.name;
    EXPECT_EQ(l.stop_reason(), "why") << c.name << ": the note stays apart";
    EXPECT_EQ(l.exit_reason(),
              c.resumable ? c.want_note : "stop not completed; no checkpoint to resume from")
        << c.name;
  }
}

}  // namespace
}  // namespace ddp
