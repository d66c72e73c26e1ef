// ChildProcess against real processes: exit codes, exec failures, environment, and the stop
// escalation with children that ignore SIGTERM or are stopped (SIGSTOP), each bounded in time.
#include "trainer/launcher/child_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

SpawnOptions Sh(const std::string& script) {
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", script};
  return o;
}

std::string TempPath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/child_process_test_", ::getpid(), "_", name);
}

bool WaitForFile(const std::string& path, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (access(path.c_str(), F_OK) != 0) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

// The process state letter from /proc/PID/stat ('S', 'T' stopped, 'Z' zombie), or '?' if gone.
char ProcState(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return '?';
  return stat[paren + 2];
}

bool WaitForState(pid_t pid, char state, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (ProcState(pid) != state) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

TEST(ChildProcess, ReportsExitCodeAndSignal) {
  auto child = ChildProcess::Spawn(Sh("exit 3"));
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE((*child)->WaitUntil(absl::Now() + absl::Seconds(10)));
  EXPECT_FALSE((*child)->running());
  EXPECT_EQ((*child)->exit_status()->code(), 3);
  EXPECT_FALSE((*child)->exit_status()->signaled());
  EXPECT_EQ((*child)->exit_status()->Describe(), "exited with code 3");

  auto killed = ChildProcess::Spawn(Sh("kill -9 $$"));
  ASSERT_TRUE(killed.ok()) << killed.status();
  ASSERT_TRUE((*killed)->WaitUntil(absl::Now() + absl::Seconds(10)));
  EXPECT_EQ((*killed)->exit_status()->signal(), SIGKILL);
  EXPECT_EQ((*killed)->exit_status()->code(), 128 + SIGKILL);
  EXPECT_EQ((*killed)->exit_status()->Describe(), "killed by signal 9");
}

TEST(ChildProcess, ExecFailureIsAnErrorAndLeavesNoChild) {
  SpawnOptions o;
  o.argv = {"/nonexistent/ddp-coordinator", "--x"};
  const absl::Time start = absl::Now();
  auto child = ChildProcess::Spawn(o);
  ASSERT_FALSE(child.ok());
  EXPECT_NE(child.status().message().find("cannot execute /nonexistent/ddp-coordinator"),
            std::string::npos)
      << child.status();
  EXPECT_NE(child.status().message().find("No such file"), std::string::npos) << child.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  // The failed child was reaped: nothing of ours is left to wait for.
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
  EXPECT_FALSE(ChildProcess::Spawn(SpawnOptions{}).ok());
}

TEST(ChildProcess, PassesExtraEnvironmentAndAnEmptySignalMask) {
  SpawnOptions env = Sh(R"(test "$DDP_TEST_VALUE" = "a b")");
  env.extra_env = {"DDP_TEST_VALUE=a b"};
  // grep, exec'd directly (a shell may block signals for a moment around its own forks), reads
  // its own mask: empty, although the spawning thread blocks SIGUSR1.
  SpawnOptions mask;
  mask.argv = {"/bin/grep", "-q", "^SigBlk:[[:space:]]*0*$", "/proc/self/status"};
  sigset_t blocked;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGUSR1);
  sigset_t before;
  sigprocmask(SIG_BLOCK, &blocked, &before);
  auto env_child = ChildProcess::Spawn(env);
  auto mask_child = ChildProcess::Spawn(mask);
  sigprocmask(SIG_SETMASK, &before, nullptr);
  ASSERT_TRUE(env_child.ok()) << env_child.status();
  ASSERT_TRUE(mask_child.ok()) << mask_child.status();
  ASSERT_TRUE((*env_child)->WaitUntil(absl::Now() + absl::Seconds(10)));
  ASSERT_TRUE((*mask_child)->WaitUntil(absl::Now() + absl::Seconds(10)));
  EXPECT_EQ((*env_child)->exit_status()->code(), 0) << "DDP_TEST_VALUE did not arrive";
  EXPECT_EQ((*mask_child)->exit_status()->code(), 0) << "the child inherited a blocked signal";
}

TEST(ChildProcess, StopEscalatesToSigkillForAChildThatIgnoresSigterm) {
  const std::string ready = TempPath("ignores_term");
  auto child =
      ChildProcess::Spawn(Sh(absl::StrCat("trap '' TERM; touch ", ready, "; exec sleep 60")));
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE(WaitForFile(ready, absl::Seconds(10)));
  const absl::Time start = absl::Now();
  auto status = (*child)->Stop(absl::Milliseconds(300));
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->signal(), SIGKILL);
  EXPECT_GE(took, absl::Milliseconds(300));
  EXPECT_LT(took, absl::Seconds(3));
  unlink(ready.c_str());
}

TEST(ChildProcess, StopEndsAStoppedChildThroughSigterm) {
  const std::string ready = TempPath("stopped");
  auto child = ChildProcess::Spawn(Sh(absl::StrCat("touch ", ready, "; exec sleep 60")));
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE(WaitForFile(ready, absl::Seconds(10)));
  ASSERT_EQ(kill((*child)->pid(), SIGSTOP), 0);
  ASSERT_TRUE(WaitForState((*child)->pid(), 'T', absl::Seconds(10)));
  const absl::Time start = absl::Now();
  auto status = (*child)->Stop(absl::Seconds(20));
  ASSERT_TRUE(status.ok()) << status.status();
  // SIGCONT lets the stopped child act on SIGTERM at once; no SIGKILL was needed.
  EXPECT_EQ(status->signal(), SIGTERM);
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  unlink(ready.c_str());
}

TEST(ChildProcess, StopKillsAStoppedChildThatIgnoresSigterm) {
  const std::string ready = TempPath("stopped_ignores_term");
  auto child =
      ChildProcess::Spawn(Sh(absl::StrCat("trap '' TERM; touch ", ready, "; exec sleep 60")));
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE(WaitForFile(ready, absl::Seconds(10)));
  ASSERT_EQ(kill((*child)->pid(), SIGSTOP), 0);
  ASSERT_TRUE(WaitForState((*child)->pid(), 'T', absl::Seconds(10)));
  const absl::Time start = absl::Now();
  auto status = (*child)->Stop(absl::Milliseconds(300));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->signal(), SIGKILL);
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  unlink(ready.c_str());
}

TEST(ChildProcess, DestructorStopsAndReapsWithinItsGrace) {
  const std::string ready = TempPath("destructor");
  SpawnOptions o = Sh(absl::StrCat("trap '' TERM; touch ", ready, "; exec sleep 60"));
  o.stop_grace = absl::Milliseconds(200);
  pid_t pid = 0;
  const absl::Time start = absl::Now();
  {
    auto child = ChildProcess::Spawn(o);
    ASSERT_TRUE(child.ok()) << child.status();
    pid = (*child)->pid();
    ASSERT_TRUE(WaitForFile(ready, absl::Seconds(10)));
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(12));
  EXPECT_EQ(ProcState(pid), '?') << "pid " << pid << " was not reaped";
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
  unlink(ready.c_str());
}

TEST(ChildProcess, SignalAfterReapingSendsNothing) {
  auto child = ChildProcess::Spawn(Sh("exit 0"));
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE((*child)->WaitUntil(absl::Now() + absl::Seconds(10)));
  (*child)->Signal(SIGKILL);  // the pid may be anybody's by now: must be a no-op
  EXPECT_EQ((*child)->exit_status()->code(), 0);
  auto stopped = (*child)->Stop(absl::Seconds(1));
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->code(), 0);
}

TEST(ChildProcess, WaitUntilHonoursItsDeadline) {
  auto child = ChildProcess::Spawn(Sh("exec sleep 60"));
  ASSERT_TRUE(child.ok()) << child.status();
  const absl::Time start = absl::Now();
  EXPECT_FALSE((*child)->WaitUntil(start + absl::Milliseconds(200)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_TRUE((*child)->running());
}

TEST(ChildProcess, DiesWithItsParent) {
  // A middle process spawns the child and is then SIGKILLed: PR_SET_PDEATHSIG ends the child.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t middle = fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    close(fds[0]);
    auto child = ChildProcess::Spawn(Sh("exec sleep 60"));
    const pid_t pid = child.ok() ? (*child)->pid() : -1;
    if (write(fds[1], &pid, sizeof(pid)) != sizeof(pid)) _exit(1);
    pause();
    _exit(0);
  }
  close(fds[1]);
  pid_t grandchild = -1;
  ASSERT_EQ(read(fds[0], &grandchild, sizeof(grandchild)),
            static_cast<ssize_t>(sizeof(grandchild)));
  close(fds[0]);
  ASSERT_GT(grandchild, 0);
  ASSERT_EQ(kill(middle, SIGKILL), 0);
  ASSERT_EQ(waitpid(middle, nullptr, 0), middle);
  // Gone, or a zombie waiting for whoever reaps orphans here.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  char state = ProcState(grandchild);
  while (state != '?' && state != 'Z' && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
    state = ProcState(grandchild);
  }
  EXPECT_TRUE(state == '?' || state == 'Z') << "state " << state;
}

}  // namespace
}  // namespace ddp
