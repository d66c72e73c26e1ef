// Supervisor against real processes: exits and signals come back as events, forwarding reaches
// only the children that take it, Stop escalates to SIGKILL by itself (also for a stopped child),
// Respawn starts a child again, and the destructor ends everything within its grace.
#include "trainer/launcher/supervisor.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

ChildSpec Sh(const std::string& name, const std::string& script, bool forward = true) {
  ChildSpec spec;
  spec.name = name;
  spec.spawn.argv = {"/bin/sh", "-c", script};
  spec.forward_signals = forward;
  return spec;
}

std::string TempPath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/supervisor_test_", ::getpid(), "_", name);
}

bool WaitForFile(const std::string& path, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (access(path.c_str(), F_OK) != 0) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

// Runs DoWork until `ids` have all ended or `timeout`; returns each one's exit code.
std::map<int, int> Drain(Supervisor& s, const std::vector<int>& ids, absl::Duration timeout) {
  std::map<int, int> codes;
  const absl::Time deadline = absl::Now() + timeout;
  while (s.CountRunning(ids) > 0 && absl::Now() < deadline) {
    for (const SupervisorEvent& e : s.DoWork(deadline)) {
      if (e.kind == SupervisorEvent::Kind::kExited) codes[e.id] = e.status->code();
    }
  }
  return codes;
}

TEST(Supervisor, ReportsEveryExitOnce) {
  Supervisor s({SIGUSR1});
  std::vector<int> ids;
  for (int code : {0, 3, 7}) {
    auto id = s.Start(Sh(absl::StrCat("c", code), absl::StrCat("exit ", code)));
    ASSERT_TRUE(id.ok()) << id.status();
    ids.push_back(*id);
  }
  EXPECT_EQ(ids, (std::vector<int>{0, 1, 2}));
  const std::map<int, int> codes = Drain(s, ids, absl::Seconds(10));
  EXPECT_EQ(codes, (std::map<int, int>{{0, 0}, {1, 3}, {2, 7}}));
  EXPECT_EQ(s.CountRunning(ids), 0);
  EXPECT_EQ(s.name(2), "c7");
  EXPECT_EQ(s.starts(2), 1);
  // Nothing runs: DoWork returns at once, even without a deadline.
  const absl::Time start = absl::Now();
  EXPECT_TRUE(s.DoWork(absl::InfiniteFuture()).empty());
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
}

TEST(Supervisor, StartFailureNamesTheChild) {
  Supervisor s({});
  ChildSpec spec;
  spec.name = "coordinator";
  spec.spawn.argv = {"/nonexistent/binary"};
  auto id = s.Start(spec);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().message().rfind("coordinator: cannot execute /nonexistent/binary", 0), 0u)
      << id.status();
}

TEST(Supervisor, SignalsBecomeEventsAndAreForwardedToTheirTakers) {
  const std::string ready_a = TempPath("fwd_a"), ready_b = TempPath("fwd_b");
  Supervisor s({SIGUSR1, SIGTERM});
  auto a = s.Start(Sh(
      "a", absl::StrCat("trap 'exit 5' USR1; touch ", ready_a, "; while :; do sleep 0.05; done")));
  auto b = s.Start(
      Sh("b", absl::StrCat("trap 'exit 6' USR1; touch ", ready_b, "; while :; do sleep 0.05; done"),
         /*forward=*/false));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(WaitForFile(ready_a, absl::Seconds(10)) && WaitForFile(ready_b, absl::Seconds(10)));
  ASSERT_EQ(kill(getpid(), SIGUSR1), 0);  // blocked: waits for DoWork
  std::vector<SupervisorEvent> events = s.DoWork(absl::Now() + absl::Seconds(10));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, SupervisorEvent::Kind::kSignal);
  EXPECT_EQ(events[0].signal, SIGUSR1);
  s.Forward(SIGUSR1);
  EXPECT_EQ(Drain(s, {*a}, absl::Seconds(10)), (std::map<int, int>{{*a, 5}}));
  EXPECT_TRUE(s.running(*b));  // does not take forwarded signals
  s.Stop(*b, absl::Seconds(5));
  EXPECT_EQ(Drain(s, {*b}, absl::Seconds(10)), (std::map<int, int>{{*b, 128 + SIGTERM}}));
  unlink(ready_a.c_str());
  unlink(ready_b.c_str());
}

// A child that has already ended is reaped by Stop (or Forward) before DoWork looks at it: its
// end must still come out of DoWork, or a launcher would lose a worker's failure.
TEST(Supervisor, AnEndReapedOutsideDoWorkIsStillReported) {
  Supervisor s({SIGUSR1});
  auto id = s.Start(Sh("quick", "exit 9"));
  ASSERT_TRUE(id.ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (kill(s.pid(*id), 0) == 0 && absl::Now() < deadline) {
    std::ifstream stat(absl::StrCat("/proc/", s.pid(*id), "/stat"));
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    if (text.find(") Z ") != std::string::npos) break;  // ended, not yet reaped
    absl::SleepFor(absl::Milliseconds(5));
  }
  s.Stop(*id, absl::Seconds(1));  // reaps it
  s.Forward(SIGUSR1);
  EXPECT_TRUE(s.running(*id)) << "counted as ended before DoWork reported it";
  EXPECT_EQ(Drain(s, {*id}, absl::Seconds(10)), (std::map<int, int>{{*id, 9}}));
  EXPECT_FALSE(s.running(*id));
}

TEST(Supervisor, StopEscalatesToSigkillInsideDoWork) {
  const std::string ready = TempPath("escalate");
  Supervisor s({});
  auto id = s.Start(Sh("stubborn", absl::StrCat("trap '' TERM; touch ", ready, "; exec sleep 60")));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(WaitForFile(ready, absl::Seconds(10)));
  const absl::Time start = absl::Now();
  s.Stop(*id, absl::Milliseconds(300));
  s.Stop(*id, absl::Seconds(60));  // never moves the SIGKILL later
  EXPECT_EQ(Drain(s, {*id}, absl::Seconds(10)), (std::map<int, int>{{*id, 128 + SIGKILL}}));
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(300));
  EXPECT_LT(took, absl::Seconds(3));
  unlink(ready.c_str());
}

TEST(Supervisor, StopEndsAStoppedChildThatIgnoresSigterm) {
  const std::string ready = TempPath("stopped");
  Supervisor s({});
  auto id = s.Start(Sh("frozen", absl::StrCat("trap '' TERM; touch ", ready, "; exec sleep 60")));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(WaitForFile(ready, absl::Seconds(10)));
  ASSERT_EQ(kill(s.pid(*id), SIGSTOP), 0);
  const absl::Time start = absl::Now();
  s.Stop(*id, absl::Milliseconds(300));
  EXPECT_EQ(Drain(s, {*id}, absl::Seconds(10)), (std::map<int, int>{{*id, 128 + SIGKILL}}));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  unlink(ready.c_str());
}

TEST(Supervisor, KillEndsAStoppedChildAndItsDescendantsAtOnce) {
  const std::string pids = TempPath("tree");
  Supervisor s({});
  // A child with a grandchild and a great-grandchild, each of which ignores SIGTERM.
  auto id = s.Start(Sh("tree", absl::StrCat("trap '' TERM; sh -c 'trap \"\" TERM; sleep 60 & echo "
                                            "$! >> ",
                                            pids, "; wait' & echo $! >> ", pids, "; wait")));
  ASSERT_TRUE(id.ok());
  std::vector<pid_t> below;
  const absl::Time ready_by = absl::Now() + absl::Seconds(10);
  while (below.size() < 2 && absl::Now() < ready_by) {
    below = Descendants(s.pid(*id));
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_EQ(below.size(), 2u) << "the child's two descendants";
  ASSERT_EQ(kill(s.pid(*id), SIGSTOP), 0);  // a hung worker: stopped, never continued
  const absl::Time start = absl::Now();
  s.Kill(*id);
  EXPECT_EQ(Drain(s, {*id}, absl::Seconds(10)), (std::map<int, int>{{*id, 128 + SIGKILL}}));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2)) << "no SIGTERM grace";
  for (pid_t p : below) {
    // Killed, not just orphaned: gone, or a zombie until its new parent reaps it.
    absl::Time gone_by = absl::Now() + absl::Seconds(5);
    bool gone = false;
    while (!gone && absl::Now() < gone_by) {
      std::ifstream stat(absl::StrCat("/proc/", p, "/stat"));
      std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
      gone = text.empty() || text.substr(text.rfind(')') + 2, 1) == "Z";
      if (!gone) absl::SleepFor(absl::Milliseconds(20));
    }
    EXPECT_TRUE(gone) << "descendant " << p << " still runs";
  }
  unlink(pids.c_str());
}

TEST(Supervisor, DescendantsOfAProcessWithoutChildrenIsEmpty) {
  EXPECT_TRUE(Descendants(0x7ffffff0).empty());
  Supervisor s({});
  auto id = s.Start(Sh("lone", "exec sleep 5"));
  ASSERT_TRUE(id.ok());
  EXPECT_TRUE(Descendants(s.pid(*id)).empty());
  s.Kill(*id);
  EXPECT_EQ(Drain(s, {*id}, absl::Seconds(10)), (std::map<int, int>{{*id, 128 + SIGKILL}}));
}

TEST(Supervisor, DoWorkHonoursItsDeadline) {
  Supervisor s({SIGUSR1});
  auto id = s.Start(Sh("sleeper", "exec sleep 60"));
  ASSERT_TRUE(id.ok());
  const absl::Time start = absl::Now();
  EXPECT_TRUE(s.DoWork(start + absl::Milliseconds(500)).empty());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(500));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  EXPECT_TRUE(s.running(*id));
}

// A launcher with no child left that retries something every second (a lost worker's report
// to a coordinator that is gone) waits in DoWork: it used to return at once, and the loop spun
// a core for the whole minute of patience. Signals still come back.
TEST(Supervisor, WithNoChildAFiniteDeadlineIsWaitedForWithoutSpinning) {
  Supervisor s({SIGUSR1});
  auto id = s.Start(Sh("quick", "exit 0"));
  ASSERT_TRUE(id.ok());
  ASSERT_EQ(Drain(s, {*id}, absl::Seconds(10)), (std::map<int, int>{{*id, 0}}));
  const absl::Time start = absl::Now();
  const std::clock_t cpu = std::clock();
  EXPECT_TRUE(s.DoWork(start + absl::Milliseconds(600)).empty());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(600));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  EXPECT_LT(static_cast<double>(std::clock() - cpu) / CLOCKS_PER_SEC, 0.2)
      << "DoWork spun instead of waiting";
  ASSERT_EQ(kill(getpid(), SIGUSR1), 0);
  const std::vector<SupervisorEvent> events = s.DoWork(absl::Now() + absl::Seconds(10));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, SupervisorEvent::Kind::kSignal);
  EXPECT_EQ(events[0].signal, SIGUSR1);
}

TEST(Supervisor, RespawnStartsTheSameCommandAgain) {
  const std::string count = TempPath("respawn_count");
  unlink(count.c_str());
  Supervisor s({});
  auto id = s.Start(Sh("flaky", absl::StrCat("echo x >> ", count, "; exit 1")));
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(Drain(s, {*id}, absl::Seconds(10)), (std::map<int, int>{{*id, 1}}));
  const pid_t first = s.pid(*id);
  ASSERT_TRUE(s.Respawn(*id).ok());
  EXPECT_EQ(s.starts(*id), 2);
  EXPECT_NE(s.pid(*id), first);
  EXPECT_EQ(Drain(s, {*id}, absl::Seconds(10)), (std::map<int, int>{{*id, 1}}));
  std::string lines;
  FILE* f = fopen(count.c_str(), "r");
  ASSERT_NE(f, nullptr);
  char buf[64];
  while (fgets(buf, sizeof(buf), f) != nullptr) lines += buf;
  fclose(f);
  EXPECT_EQ(lines, "x\nx\n");
  unlink(count.c_str());
}

TEST(Supervisor, RespawnRefusesARunningChild) {
  Supervisor s({});
  auto id = s.Start(Sh("sleeper", "exec sleep 60"));
  ASSERT_TRUE(id.ok());
  const absl::Status again = s.Respawn(*id);
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition) << again;
  EXPECT_EQ(s.starts(*id), 1);
}

TEST(Supervisor, DestructorEndsEveryChildWithinOneGrace) {
  std::vector<pid_t> pids;
  std::vector<std::string> ready;
  const absl::Time start = absl::Now();
  {
    Supervisor s({SIGUSR1});
    for (int i = 0; i < 4; ++i) {
      ready.push_back(TempPath(absl::StrCat("dtor", i)));
      ChildSpec spec = Sh(absl::StrCat("w", i),
                          absl::StrCat("trap '' TERM; touch ", ready.back(), "; exec sleep 60"));
      spec.spawn.stop_grace = absl::Milliseconds(300);
      auto id = s.Start(spec);
      ASSERT_TRUE(id.ok());
      pids.push_back(s.pid(*id));
    }
    for (const std::string& r : ready) ASSERT_TRUE(WaitForFile(r, absl::Seconds(10)));
    ASSERT_EQ(kill(getpid(), SIGUSR1), 0);  // left pending: dropped, must not kill us
  }
  // One grace for all four (not four in a row), then SIGKILL.
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  for (pid_t pid : pids) {
    EXPECT_EQ(kill(pid, 0), -1) << "pid " << pid << " still exists";
  }
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
  for (const std::string& r : ready) unlink(r.c_str());
}

}  // namespace
}  // namespace ddp
