// FailurePolicy: what each worker end means, in sequences that cover the launcher's rules.
#include "trainer/launcher/failure_policy.h"

#include <sys/wait.h>

#include <csignal>
#include <string>
#include <vector>

#include "common/exit_codes.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

using Action = FailurePolicy::Action;

ExitStatus Exited(int code) { return ExitStatus(W_EXITCODE(code, 0)); }
ExitStatus Killed(int sig) { return ExitStatus(sig); }  // WIFSIGNALED status

struct Step {
  ExitStatus status;
  Action action;
  bool failure;
  bool report_lost;
};

struct Case {
  std::string name;
  int max_restarts;
  int forwarded;  // the signal forwarded before the first end (0: none)
  std::vector<Step> steps;
  int task_exit_code;
};

TEST(FailurePolicy, Sequences) {
  const std::vector<Case> cases = {
      {"all succeed",
       0,
       0,
       {{Exited(0), Action::kNone, false, false}, {Exited(0), Action::kNone, false, false}},
       kExitOk},
      {"stopped for requeue",
       0,
       true,
       {{Exited(kExitResumable), Action::kNone, false, false},
        {Exited(kExitResumable), Action::kNone, false, false}},
       kExitResumable},
      {"one resumable, one done",
       0,
       0,
       {{Exited(0), Action::kNone, false, false},
        {Exited(kExitResumable), Action::kNone, false, false}},
       kExitResumable},
      {"killed worker: stop the others, report it lost",
       0,
       0,
       {{Killed(9), Action::kStopOthers, true, true},
        {Killed(15), Action::kNone, true, false},
        {Exited(kExitAborted), Action::kNone, true, false}},
       kExitFailed},
      {"killed after a forwarded signal: not reported",
       0,
       true,
       {{Killed(10), Action::kStopOthers, true, false},
        {Exited(kExitResumable), Action::kNone, false, false}},
       kExitFailed},
      {"aborted by the coordinator first",
       0,
       0,
       {{Exited(kExitAborted), Action::kStopOthers, true, false},
        {Exited(kExitFailed), Action::kNone, true, false}},
       kExitAborted},
      {"bad flags", 0, false, {{Exited(kExitUsage), Action::kStopOthers, true, false}}, kExitUsage},
      {"a failure outranks an earlier resumable exit",
       0,
       0,
       {{Exited(kExitResumable), Action::kNone, false, false},
        {Exited(1), Action::kStopOthers, true, false}},
       kExitFailed},
      {"odd exit codes count as failed",
       0,
       0,
       {{Exited(127), Action::kStopOthers, true, false}},
       kExitFailed},
      {"respawn while respawns are left",
       1,
       0,
       {{Killed(9), Action::kRespawn, true, true},
        {Killed(9), Action::kStopOthers, true, true},
        {Exited(kExitAborted), Action::kNone, true, false}},
       kExitFailed},
      {"a crash is respawned (and reported) too",
       2,
       0,
       {{Exited(kExitFailed), Action::kRespawn, true, true}},
       kExitOk},
      {"no respawn for an aborted job or bad flags",
       2,
       0,
       {{Exited(kExitAborted), Action::kStopOthers, true, false}},
       kExitAborted},
      {"no respawn after a forwarded signal",
       3,
       SIGTERM,
       {{Exited(1), Action::kStopOthers, true, false}},
       kExitFailed},
      {"nor of a kill after SIGTERM",
       3,
       SIGTERM,
       {{Killed(9), Action::kStopOthers, true, false}},
       kExitFailed},
      {"a kill after SIGUSR1 (checkpoint and stop) is a loss: reported and respawned",
       3,
       SIGUSR1,
       {{Killed(9), Action::kRespawn, true, true},
        {Exited(kExitResumable), Action::kNone, false, false}},
       kExitResumable},
      {"an exit with a code after SIGUSR1 is not respawned",
       3,
       SIGUSR1,
       {{Exited(1), Action::kStopOthers, true, false}},
       kExitFailed},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    FailurePolicy policy(c.max_restarts);
    if (c.forwarded != 0) policy.OnSignalForwarded(c.forwarded);
    for (size_t i = 0; i < c.steps.size(); ++i) {
      SCOPED_TRACE(i);
      const Step& s = c.steps[i];
      const FailurePolicy::Decision d = policy.OnWorkerExit(s.status);
      // The coordinator (not here) answers RESPAWN to a kRespawn and STOP to the rest.
      if (d.ask && d.action != Action::kRespawn) policy.OnRespawnDeclined(s.status, true);
      EXPECT_EQ(d.action, s.action);
      EXPECT_EQ(d.failure, s.failure);
      EXPECT_EQ(d.report_lost, s.report_lost);
    }
    EXPECT_EQ(policy.task_exit_code(), c.task_exit_code);
  }
}

TEST(FailurePolicy, DeclinedRespawnFailsTheTask) {
  FailurePolicy policy(3);
  ASSERT_EQ(policy.OnWorkerExit(Killed(9)).action, Action::kRespawn);
  EXPECT_EQ(policy.task_exit_code(), kExitOk);
  policy.OnRespawnDeclined(Killed(9), /*stop_others=*/true);
  EXPECT_TRUE(policy.stopping());
  EXPECT_EQ(policy.task_exit_code(), kExitFailed);
  // The others being stopped are not respawned.
  EXPECT_EQ(policy.OnWorkerExit(Killed(15)).action, Action::kNone);
}

TEST(FailurePolicy, LeavingEndsTheTaskOkWhateverTheWorkersDieOf) {
  FailurePolicy policy(3);
  ASSERT_TRUE(policy.OnWorkerExit(Killed(9)).ask);  // fenced; the coordinator answers LEAVE
  policy.OnLeave();
  EXPECT_TRUE(policy.leaving());
  EXPECT_TRUE(policy.stopping());
  // The node's other workers, fenced or stopped, are no failure either.
  EXPECT_FALSE(policy.OnWorkerExit(Killed(9)).failure);
  EXPECT_FALSE(policy.OnWorkerExit(Exited(1)).failure);
  EXPECT_EQ(policy.task_exit_code(), kExitOk);
}

TEST(FailurePolicy, AReplacementThatCannotStartIsTheCoordinatorsToJudge) {
  FailurePolicy policy(3);
  ASSERT_EQ(policy.OnWorkerExit(Killed(9)).action, Action::kRespawn);
  const FailurePolicy::Decision d = policy.OnWorkerExit(Exited(kExitUsage), /*respawned=*/true);
  EXPECT_TRUE(d.ask);
  EXPECT_TRUE(d.report_lost);
  EXPECT_EQ(d.action, Action::kStopOthers);  // never started again
  // The coordinator answers WAIT (the job's deadline decides): the others keep running.
  policy.OnRespawnDeclined(Exited(kExitUsage), /*stop_others=*/false);
  EXPECT_FALSE(policy.stopping());
  EXPECT_EQ(policy.task_exit_code(), kExitUsage);
  // A first worker with bad flags is not asked about: it fails the task as always.
  FailurePolicy fresh(3);
  EXPECT_FALSE(fresh.OnWorkerExit(Exited(kExitUsage)).ask);
}

TEST(FailurePolicy, RestartsExhaustedAtTheCoordinatorAbortTheTask) {
  FailurePolicy policy(3);
  const FailurePolicy::Decision d = policy.OnWorkerExit(Killed(9));
  ASSERT_TRUE(d.ask);
  policy.OnRespawnDeclined(Killed(9), /*stop_others=*/true, /*job_failed=*/true);
  EXPECT_EQ(policy.task_exit_code(), kExitAborted);
}

// A worker that failed by itself (exit 1, e.g. its stop checkpoint could not be written) is the
// job's failure: the coordinator's STOP does not turn the task's code into kExitAborted.
TEST(FailurePolicy, AWorkersOwnErrorExitKeepsItsCodeWhenTheJobFailed) {
  FailurePolicy policy(3);
  const FailurePolicy::Decision d = policy.OnWorkerExit(Exited(kExitFailed));
  ASSERT_TRUE(d.ask);
  policy.OnRespawnDeclined(Exited(kExitFailed), /*stop_others=*/true, /*job_failed=*/true);
  EXPECT_EQ(policy.task_exit_code(), kExitFailed);
}

TEST(FailurePolicy, WaitKeepsTheOthersRunning) {
  FailurePolicy policy(3);
  ASSERT_EQ(policy.OnWorkerExit(Killed(9)).action, Action::kRespawn);
  policy.OnRespawnDeclined(Killed(9), /*stop_others=*/false);
  EXPECT_FALSE(policy.stopping());
  EXPECT_EQ(policy.task_exit_code(), kExitFailed);
}

TEST(FailurePolicy, LaunchFailureFailsTheTaskAndStops) {
  FailurePolicy policy;
  policy.OnLaunchFailure();
  EXPECT_TRUE(policy.stopping());
  EXPECT_EQ(policy.task_exit_code(), kExitFailed);
  // Later ends are not "first" failures any more.
  EXPECT_EQ(policy.OnWorkerExit(Killed(9)).action, Action::kNone);
}

}  // namespace
}  // namespace ddp
