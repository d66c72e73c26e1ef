// RunLauncher with real child processes standing in for the workers and the coordinator (shell
// scripts that read their DDP_WORKER_* placement): the failure policy, signal forwarding, the
// coordinator's linger, and the bounds on every wait, with children that ignore SIGTERM or are
// stopped (SIGSTOP).
#include "trainer/launcher/launcher.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

std::vector<std::string> Sh(const std::string& script) { return {"/bin/sh", "-c", script}; }

LaunchPlan Plan(int workers, bool coordinator) {
  LaunchPlan plan;
  plan.mode = "local";
  plan.base.job_id = "launcher-test";
  plan.base.world_size = workers;
  plan.base.local_world_size = workers;
  plan.base.dist_file = absl::StrCat(::testing::TempDir(), "/launcher_test_", getpid());
  plan.base.coordinator_log = plan.base.dist_file + ".coordinator.log";
  for (int i = 0; i < workers; ++i) plan.local_ranks.push_back(i);
  plan.start_coordinator = coordinator;
  return plan;
}

// Short timeouts, so that every bound is checked in about a second.
SupervisionTimeouts Fast() {
  SupervisionTimeouts t;
  t.worker_stop_grace = absl::Milliseconds(300);
  t.coordinator_linger = absl::Milliseconds(200);
  t.coordinator_exit_margin = absl::Milliseconds(200);
  t.coordinator_failed_wait = absl::Milliseconds(200);
  t.coordinator_stop_grace = absl::Milliseconds(300);
  return t;
}

// A worker that behaves by its local rank: `cases` are shell `case` arms.
std::vector<std::string> Worker(const std::string& cases) {
  return Sh(absl::StrCat("case $DDP_WORKER_LOCAL_RANK in ", cases, " esac"));
}

void ExpectNoChildLeft() {
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST(Launcher, AllWorkersSucceedAndTheCoordinatorEndsByItself) {
  LauncherOptions o;
  o.timeouts = Fast();
  o.worker_command = Worker(
      R"(*) test "$DDP_WORKER_JOB_ID" = launcher-test && test "$DDP_WORKER_WORLD_SIZE" = 3 ;;)");
  o.coordinator_command = Sh("sleep 0.1");
  EXPECT_EQ(RunLauncher(Plan(3, true), o), kExitOk);
  ExpectNoChildLeft();
}

TEST(Launcher, FailedWorkerStopsItsPeersEvenIfTheyIgnoreSigterm) {
  LauncherOptions o;
  o.timeouts = Fast();
  // Rank 1 dies by SIGKILL after rank 2 is ready; rank 2 ignores SIGTERM; rank 0 exits 3 on it.
  const std::string ready = absl::StrCat(::testing::TempDir(), "/launcher_ready_", getpid());
  o.worker_command =
      Worker(absl::StrCat("0) trap 'exit 3' TERM; while :; do sleep 0.05; done ;;",
                          "1) while [ ! -e ", ready, " ]; do sleep 0.01; done; kill -9 $$ ;;",
                          "2) trap '' TERM; touch ", ready, "; exec sleep 60 ;;"));
  std::vector<LostWorker> lost;
  o.report_lost = [&lost](const LostWorker& w) {
    lost.push_back(w);
    return LostDecision{"rank 7 (test)", LostAction::kStop};
  };
  const absl::Time start = absl::Now();
  EXPECT_EQ(RunLauncher(Plan(3, false), o), kExitFailed);
  const absl::Duration took = absl::Now() - start;
  EXPECT_LT(took, absl::Seconds(5)) << "worker_stop_grace is 300 ms";
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].local_rank, 1);
  EXPECT_EQ(lost[0].what, "killed by signal 9");
  ExpectNoChildLeft();
  unlink(ready.c_str());
}

// In-job recovery: the coordinator answers RESPAWN, the launcher starts the killed worker again
// on the same local rank, and the task succeeds once the new run does.
TEST(Launcher, RespawnsAKilledWorkerWhenTheCoordinatorSaysSo) {
  LauncherOptions o;
  o.timeouts = Fast();
  o.max_restarts = 3;
  const std::string once = absl::StrCat(::testing::TempDir(), "/launcher_respawn_", getpid());
  unlink(once.c_str());
  o.worker_command = Worker(absl::StrCat("0) sleep 0.3 ;;", "1) if [ -e ", once,
                                         " ]; then exit 0; fi; touch ", once, "; kill -9 $$ ;;"));
  std::vector<LostWorker> lost;
  o.report_lost = [&lost](const LostWorker& w) {
    lost.push_back(w);
    return LostDecision{"rank 1 (test)", LostAction::kRespawn};
  };
  EXPECT_EQ(RunLauncher(Plan(2, false), o), kExitOk);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].local_rank, 1);
  EXPECT_EQ(lost[0].signal, SIGKILL);
  ExpectNoChildLeft();
  unlink(once.c_str());
}

// A hung worker (stopped, never continued) named by the coordinator's fence is SIGKILLed, then
// reported and replaced like a dead one; a worker not named is left alone.
TEST(Launcher, AFencedWorkerIsKilledReportedAndReplaced) {
  LauncherOptions o;
  o.timeouts = Fast();
  o.max_restarts = 3;
  o.fence_period = absl::Milliseconds(100);
  const std::string once = absl::StrCat(::testing::TempDir(), "/launcher_fence_", getpid());
  unlink(once.c_str());
  o.worker_command =
      Worker(absl::StrCat("0) sleep 1 ;;", "1) if [ -e ", once, " ]; then exit 0; fi; touch ", once,
                          "; kill -STOP $$ ;;"));
  std::vector<std::vector<LiveWorker>> asked;
  o.fences = [&](int node_rank,
                 const std::vector<LiveWorker>& live) -> absl::StatusOr<std::vector<FenceOrder>> {
    EXPECT_EQ(node_rank, 0);
    asked.push_back(live);
    std::vector<FenceOrder> orders;
    for (const LiveWorker& w : live) {
      std::ifstream stat(absl::StrCat("/proc/", w.pid, "/stat"));
      std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
      const bool stopped = !text.empty() && text.substr(text.rfind(')') + 2, 1) == "T";
      if (w.local_rank == 1 && stopped) orders.push_back({1, w.pid, "rank 1 lost: test"});
    }
    return orders;
  };
  std::vector<LostWorker> lost;
  o.report_lost = [&lost](const LostWorker& w) {
    lost.push_back(w);
    return LostDecision{"rank 1 (test)", LostAction::kRespawn};
  };
  const absl::Time start = absl::Now();
  EXPECT_EQ(RunLauncher(Plan(2, false), o), kExitOk);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  ASSERT_EQ(lost.size(), 1u) << "only the fenced worker was lost";
  EXPECT_EQ(lost[0].local_rank, 1);
  EXPECT_EQ(lost[0].signal, SIGKILL);
  ASSERT_FALSE(asked.empty());
  EXPECT_EQ(asked[0].size(), 2u) << "the task names every running worker";
  ExpectNoChildLeft();
  unlink(once.c_str());
}

// A fence query that fails (the coordinator unreachable) changes nothing.
TEST(Launcher, FailedFenceQueriesLeaveTheWorkersAlone) {
  LauncherOptions o;
  o.timeouts = Fast();
  o.max_restarts = 3;
  o.fence_period = absl::Milliseconds(50);
  o.worker_command = Worker("0|1) sleep 0.5 ;;");
  int asked = 0;
  o.fences = [&](int, const std::vector<LiveWorker>&) -> absl::StatusOr<std::vector<FenceOrder>> {
    ++asked;
    return absl::UnavailableError("no coordinator");
  };
  o.report_lost = [](const LostWorker&) { return LostDecision{}; };
  EXPECT_EQ(RunLauncher(Plan(2, false), o), kExitOk);
  EXPECT_GE(asked, 2);
  ExpectNoChildLeft();
}

// A spare node starts nothing until the coordinator gives it a lost node; then it runs that
// node's workers as that node.
TEST(Launcher, ASpareStartsTheLostNodesWorkersWhenToldToTakeOver) {
  LauncherOptions o;
  o.timeouts = Fast();
  o.stand_by_period = absl::Milliseconds(20);
  const std::string ran = absl::StrCat(::testing::TempDir(), "/launcher_spare_", getpid());
  unlink(ran.c_str());
  o.worker_command =
      Sh(absl::StrCat("test \"$DDP_WORKER_NODE_RANK\" = 1 && echo "
                      "$DDP_WORKER_LOCAL_RANK >> ",
                      ran));
  int asked = 0;
  o.stand_by = [&asked]() -> absl::StatusOr<SpareDecision> {
    if (++asked < 3) return SpareDecision{};  // wait
    if (asked == 3) return absl::UnavailableError("coordinator restarting");
    return SpareDecision{SpareAction::kTakeOver, 1, "node 1 (host h1, ranks 2,3)"};
  };
  LaunchPlan plan = Plan(2, false);
  plan.spare = true;
  plan.base.node_rank = 2;
  EXPECT_EQ(RunLauncher(plan, o), kExitOk);
  EXPECT_EQ(asked, 4);
  FILE* f = fopen(ran.c_str(), "r");
  ASSERT_NE(f, nullptr) << "no worker ran as node 1";
  int lines = 0;
  for (int c; (c = fgetc(f)) != EOF;) lines += c == '\n' ? 1 : 0;
  fclose(f);
  EXPECT_EQ(lines, 2);
  ExpectNoChildLeft();
  unlink(ran.c_str());
}

TEST(Launcher, ASpareLeavesWhenTheJobEndsOnASignalOrWithoutAnswers) {
  LauncherOptions o;
  o.timeouts = Fast();
  o.stand_by_period = absl::Milliseconds(20);
  o.worker_command = Sh("exit 9");  // never started
  LaunchPlan plan = Plan(2, false);
  plan.spare = true;
  o.stand_by = []() -> absl::StatusOr<SpareDecision> {
    return SpareDecision{SpareAction::kLeave, -1, "job SUCCEEDED"};
  };
  EXPECT_EQ(RunLauncher(plan, o), kExitOk);
  o.stand_by = []() -> absl::StatusOr<SpareDecision> {
    return absl::InvalidArgumentError("node 0 holds ranks of this job");
  };
  EXPECT_EQ(RunLauncher(plan, o), kExitUsage);
  o.stand_by_unanswered = absl::Milliseconds(200);
  o.stand_by = []() -> absl::StatusOr<SpareDecision> { return absl::UnavailableError("gone"); };
  const absl::Time start = absl::Now();
  EXPECT_EQ(RunLauncher(plan, o), kExitOk);
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  o.stand_by_unanswered = absl::Seconds(60);
  o.stand_by = []() -> absl::StatusOr<SpareDecision> {
    ::kill(::getpid(), SIGTERM);  // taken by the launcher's wait, not the default action
    return SpareDecision{};
  };
  EXPECT_EQ(RunLauncher(plan, o), kExitOk);
  ExpectNoChildLeft();
}

// The coordinator answers STOP (restarts exhausted): the others are stopped, and the task ends
// with the aborted code, as its workers do.
TEST(Launcher, StopsThePeersWhenTheCoordinatorRefusesARespawn) {
  LauncherOptions o;
  o.timeouts = Fast();
  o.max_restarts = 3;
  o.worker_command = Worker("0) trap '' TERM; exec sleep 60 ;; 1) kill -9 $$ ;;");
  int reports = 0;
  o.report_lost = [&reports](const LostWorker&) {
    ++reports;
    return LostDecision{"rank 1 (test)", LostAction::kStop};
  };
  const absl::Time start = absl::Now();
  EXPECT_EQ(RunLauncher(Plan(2, false), o), kExitAborted);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(reports, 1);
  ExpectNoChildLeft();
}

// A shell command that writes the job's result file (common/job_result.h) as its coordinator
// does once the job has ended.
std::string WriteResult(const LaunchPlan& plan, const std::string& state) {
  return absl::StrCat("(umask 077; printf 'job_id=", plan.base.job_id,
                      "\\ngeneration=", plan.base.generation, "\\nstate=", state,
                      "\\nexit_code=1\\n' > ", plan.base.dist_file, ".result)");
}

// A worker that fails after its coordinator ended the job (wrote FAILED, exited) is not
// reported again and again to a coordinator that is gone: the task ends at once, not after the
// whole patience (a refused checkpoint took a minute this way, spinning a core).
TEST(Launcher, ALostWorkerOfAnEndedJobIsNotReportedAgain) {
  const LaunchPlan plan = Plan(1, true);
  unlink((plan.base.dist_file + ".result").c_str());
  LauncherOptions o;
  o.timeouts = Fast();
  o.max_restarts = 3;
  o.lost_report_patience = absl::Seconds(60);
  o.coordinator_command = Sh(absl::StrCat(WriteResult(plan, "FAILED"), "; exit 1"));
  o.coordinator_resume_command = Sh("sleep 0.1");
  o.coordinator_restarts = 3;
  o.worker_command = Worker("*) sleep 0.5; exit 1 ;;");
  int reports = 0;
  o.report_lost = [&reports](const LostWorker&) {
    ++reports;
    LostDecision none;
    none.unanswered = true;
    return none;
  };
  const absl::Time start = absl::Now();
  EXPECT_EQ(RunLauncher(plan, o), kExitFailed);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(reports, 0) << "reported to the coordinator of a job that had ended";
  ExpectNoChildLeft();
  unlink((plan.base.dist_file + ".result").c_str());
}

TEST(Launcher, AbortedWorkerGivesTheAbortedCode) {
  LauncherOptions o;
  o.timeouts = Fast();
  o.worker_command = Worker(absl::StrCat("0) exit ", kExitAborted, " ;; *) exec sleep 60 ;;"));
  int reports = 0;
  o.report_lost = [&reports](const LostWorker&) {
    ++reports;
    return LostDecision{};
  };
  EXPECT_EQ(RunLauncher(Plan(2, false), o), kExitAborted);
  EXPECT_EQ(reports, 0) << "an exit code is not a lost worker";
  ExpectNoChildLeft();
}

TEST(Launcher, ACoordinatorThatDiesLeavesTheWorkersRunningAndTheirCodeIsTheTasks) {
  LauncherOptions o;
  o.timeouts = Fast();
  // The workers outlive the coordinator by far, then exit resumable (a lost coordinator's stop).
  o.worker_command = Worker(absl::StrCat("*) sleep 1; exit ", kExitResumable, " ;;"));
  o.coordinator_command = Sh("kill -9 $$");
  int reports = 0;
  o.report_lost = [&reports](const LostWorker&) {
    ++reports;
    return LostDecision{};
  };
  const absl::Time start = absl::Now();
  EXPECT_EQ(RunLauncher(Plan(2, true), o), kExitResumable) << "the workers' code";
  EXPECT_GE(absl::Now() - start, absl::Seconds(1)) << "the workers were not stopped early";
  EXPECT_EQ(reports, 0);
  ExpectNoChildLeft();
}

TEST(Launcher, ForwardsSignalsToWorkersAndEndsResumable) {
  LauncherOptions o;
  o.timeouts = Fast();
  // Rank 0 signals the launcher (its parent) once both workers trap USR1.
  const std::string ready = absl::StrCat(::testing::TempDir(), "/launcher_fwd_", getpid());
  o.worker_command = Worker(
      absl::StrCat("0) trap 'exit 3' USR1; while [ ! -e ", ready,
                   " ]; do sleep 0.01; done; kill -USR1 $PPID;", " while :; do sleep 0.05; done ;;",
                   "1) trap 'exit 3' USR1; touch ", ready, "; while :; do sleep 0.05; done ;;"));
  int reports = 0;
  o.report_lost = [&reports](const LostWorker&) {
    ++reports;
    return LostDecision{};
  };
  EXPECT_EQ(RunLauncher(Plan(2, false), o), kExitResumable);
  EXPECT_EQ(reports, 0);
  ExpectNoChildLeft();
  unlink(ready.c_str());
}

TEST(Launcher, WorkersThatDoNotEndAfterAStopSignalAreStoppedAtTheDeadline) {
  LauncherOptions o;
  o.timeouts = Fast();
  o.timeouts.signal_stop_deadline = absl::Seconds(1);
  // Rank 0 acts on USR1 (exit 3); rank 1 is stuck: it ignores USR1 and SIGTERM alike.
  const std::string ready = absl::StrCat(::testing::TempDir(), "/launcher_stuck_", getpid());
  o.worker_command = Worker(
      absl::StrCat("0) trap 'exit 3' USR1; while [ ! -e ", ready,
                   " ]; do sleep 0.01; done; kill -USR1 $PPID;", " while :; do sleep 0.05; done ;;",
                   "1) trap '' USR1 TERM; touch ", ready, "; while :; do sleep 0.05; done ;;"));
  const absl::Time start = absl::Now();
  // Rank 1 dies by SIGKILL after deadline + grace: a failure, so not resumable.
  EXPECT_EQ(RunLauncher(Plan(2, false), o), kExitFailed);
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Seconds(1));
  EXPECT_LT(took, absl::Seconds(10));
  ExpectNoChildLeft();
  unlink(ready.c_str());
}

TEST(Launcher, CoordinatorThatIgnoresSigtermIsKilledInTime) {
  LauncherOptions o;
  o.timeouts = Fast();
  o.worker_command = Worker("*) exit 1 ;;");
  o.coordinator_command = Sh("trap '' TERM; exec sleep 60");
  const absl::Time start = absl::Now();
  EXPECT_EQ(RunLauncher(Plan(2, true), o), kExitFailed);
  // failed wait 200 ms + stop grace 300 ms + SIGKILL.
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
  ExpectNoChildLeft();
}

TEST(Launcher, StoppedCoordinatorDoesNotHangTheTask) {
  // The coordinator stops itself (SIGSTOP) and ignores SIGTERM: before, task 0 waited for it
  // forever. Now: linger + margin, SIGTERM + SIGCONT, grace, SIGKILL.
  LauncherOptions o;
  o.timeouts = Fast();
  o.worker_command = Worker("*) exit 0 ;;");
  o.coordinator_command = Sh("trap '' TERM; kill -STOP $$; exec sleep 60");
  const absl::Time start = absl::Now();
  EXPECT_EQ(RunLauncher(Plan(1, true), o), kExitOk);
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(400)) << "the coordinator's linger was not honoured";
  EXPECT_LT(took, absl::Seconds(4));
  ExpectNoChildLeft();
}

TEST(Launcher, CoordinatorLingersAfterSuccessUntilItsDeadline) {
  LauncherOptions o;
  o.timeouts = Fast();
  o.timeouts.coordinator_linger = absl::Milliseconds(800);
  o.worker_command = Worker("*) exit 0 ;;");
  // Lingers 0.5 s (less than linger + margin): the launcher waits for it and sends nothing.
  const std::string marker = absl::StrCat(::testing::TempDir(), "/launcher_linger_", getpid());
  o.coordinator_command =
      Sh(absl::StrCat("trap 'touch ", marker, "; exit 0' TERM; sleep 0.5; exit 0"));
  const absl::Time start = absl::Now();
  EXPECT_EQ(RunLauncher(Plan(1, true), o), kExitOk);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(500));
  EXPECT_NE(access(marker.c_str(), F_OK), 0) << "the coordinator got SIGTERM while lingering";
  ExpectNoChildLeft();
}

TEST(Launcher, MissingCoordinatorFailsAtOnce) {
  LauncherOptions o;
  o.timeouts = Fast();
  o.worker_command = Worker("*) exit 0 ;;");
  o.coordinator_command = {"/nonexistent/ddp-coordinator"};
  const absl::Time start = absl::Now();
  EXPECT_EQ(RunLauncher(Plan(2, true), o), kExitFailed);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  ExpectNoChildLeft();
}

TEST(Launcher, MissingWorkerProgramFailsAndStopsTheRest) {
  LauncherOptions o;
  o.timeouts = Fast();
  o.worker_command = {"/nonexistent/ddp-trainer"};
  o.coordinator_command = Sh("exec sleep 60");
  const absl::Time start = absl::Now();
  EXPECT_EQ(RunLauncher(Plan(2, true), o), kExitFailed);
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
  ExpectNoChildLeft();
}

// A coordinator that dies while workers run is restarted with its resume command; one that exits
// 0 is not; a restarted one that exits non-zero by itself is not restarted again; and
// --coordinator-restarts 0 turns it off. The resume command appends a line to `runs`.
class CoordinatorRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runs_ = absl::StrCat(::testing::TempDir(), "/launcher_coord_runs_", getpid());
    unlink(runs_.c_str());
  }
  void TearDown() override { unlink(runs_.c_str()); }
  int Restarts() const {
    FILE* f = std::fopen(runs_.c_str(), "r");
    if (f == nullptr) return 0;
    int lines = 0;
    for (int c; (c = std::fgetc(f)) != EOF;) lines += c == '\n' ? 1 : 0;
    std::fclose(f);
    return lines;
  }
  LauncherOptions Options(const std::string& coordinator, const std::string& resumed, int max) {
    LauncherOptions o;
    o.timeouts = Fast();
    o.worker_command = Worker("*) sleep 1.5 ;;");
    o.coordinator_command = Sh(coordinator);
    o.coordinator_resume_command = Sh(absl::StrCat("echo run >> ", runs_, "; ", resumed));
    o.coordinator_restarts = max;
    return o;
  }
  std::string runs_;
};

TEST_F(CoordinatorRestartTest, RestartedAfterSigkill) {
  EXPECT_EQ(RunLauncher(Plan(2, true), Options("sleep 0.2; kill -9 $$", "sleep 0.1", 3)), kExitOk);
  EXPECT_EQ(Restarts(), 1);
  ExpectNoChildLeft();
}

TEST_F(CoordinatorRestartTest, KilledAgainIsRestartedAgainUpToTheLimit) {
  EXPECT_EQ(RunLauncher(Plan(1, true), Options("sleep 0.1; kill -9 $$", "kill -9 $$", 2)), kExitOk);
  EXPECT_EQ(Restarts(), 2);
  ExpectNoChildLeft();
}

TEST_F(CoordinatorRestartTest, NotRestartedAfterExitZero) {
  EXPECT_EQ(RunLauncher(Plan(2, true), Options("exit 0", "sleep 0.1", 3)), kExitOk);
  EXPECT_EQ(Restarts(), 0);
  ExpectNoChildLeft();
}

TEST_F(CoordinatorRestartTest, ARestartedOnesOwnErrorExitIsFinal) {
  EXPECT_EQ(RunLauncher(Plan(1, true), Options("sleep 0.1; kill -9 $$", "exit 1", 3)), kExitOk);
  EXPECT_EQ(Restarts(), 1);
  ExpectNoChildLeft();
}

// A coordinator that exits after it wrote the job's result has ended the job: nothing to resume.
// A result left at the path by an earlier run of the same job id does not count (task 0
// removes it before it starts the coordinator).
TEST_F(CoordinatorRestartTest, NotRestartedOnceItWroteTheJobsResult) {
  const LaunchPlan plan = Plan(1, true);
  EXPECT_EQ(RunLauncher(plan, Options(absl::StrCat(WriteResult(plan, "FAILED"), "; exit 1"),
                                      "sleep 0.1", 3)),
            kExitOk);
  EXPECT_EQ(Restarts(), 0);
  ASSERT_EQ(system(WriteResult(plan, "FAILED").c_str()), 0);  // a stale one, before the start
  EXPECT_EQ(RunLauncher(plan, Options("sleep 0.1; kill -9 $$", "sleep 0.1", 3)), kExitOk);
  EXPECT_EQ(Restarts(), 1);
  ExpectNoChildLeft();
  unlink((plan.base.dist_file + ".result").c_str());
}

TEST_F(CoordinatorRestartTest, ZeroRestartsTurnsItOff) {
  EXPECT_EQ(RunLauncher(Plan(1, true), Options("sleep 0.1; kill -9 $$", "sleep 0.1", 0)), kExitOk);
  EXPECT_EQ(Restarts(), 0);
  ExpectNoChildLeft();
}

}  // namespace
}  // namespace ddp
