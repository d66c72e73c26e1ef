#include "bench/loadgen/agent_process.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ddp::bench {
namespace {

class AgentProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/agent_process_test.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    std::remove(log().c_str());
    rmdir(dir_.c_str());
  }
  std::string log() const { return dir_ + "/child.log"; }
  std::unique_ptr<AgentProcess> Sh(const std::string& script) {
    AgentProcess::Options o;
    o.argv = {"/bin/sh", "-c", script};
    o.log_path = log();
    auto c = AgentProcess::Start(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
  std::string dir_;
};

TEST_F(AgentProcessTest, CommandAndReplyOverPipesStderrToTheLog) {
  auto c = Sh("while read cmd; do echo \"ok got=$cmd\"; echo to-stderr >&2; done");
  ASSERT_NE(c, nullptr);
  for (const char* cmd : {"connect", "rendezvous"}) {
    auto r = c->Call(cmd, absl::Now() + absl::Seconds(10));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(*r->String("got"), cmd);
  }
  EXPECT_EQ(c->State(), "running");
  c->Kill();
  std::ifstream in(log());
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("to-stderr"), std::string::npos);
}

TEST_F(AgentProcessTest, AChildThatNeverAnswersTimesOutAndIsKilled) {
  auto c = Sh("exec sleep 60");
  ASSERT_NE(c, nullptr);
  const absl::Time t0 = absl::Now();
  auto line = c->ReadLine(absl::Now() + absl::Milliseconds(300));
  EXPECT_EQ(line.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(line.status().message().find("running"), absl::string_view::npos);
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
  const pid_t pid = c->pid();
  c.reset();  // SIGKILL and reap
  EXPECT_EQ(kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST_F(AgentProcessTest, ExitAndSignalAreNamed) {
  auto quits = Sh("exit 3");
  ASSERT_NE(quits, nullptr);
  auto r = quits->ReadLine(absl::Now() + absl::Seconds(10));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("exit 3"), absl::string_view::npos) << r.status();

  auto killed = Sh("exec sleep 60");
  ASSERT_NE(killed, nullptr);
  ASSERT_EQ(kill(killed->pid(), SIGKILL), 0);
  r = killed->ReadLine(absl::Now() + absl::Seconds(10));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("signal 9"), absl::string_view::npos) << r.status();
}

TEST_F(AgentProcessTest, ErrorRepliesAndMissingExecutables) {
  auto c = Sh("read cmd; echo 'error no such command'");
  ASSERT_NE(c, nullptr);
  auto r = c->Call("beat", absl::Now() + absl::Seconds(10));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no such command"), absl::string_view::npos);

  AgentProcess::Options o;
  o.argv = {dir_ + "/not-there"};
  o.log_path = log();
  // The exec failure is reported by Start itself (ChildProcess::Spawn), naming the program.
  auto missing = AgentProcess::Start(o);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cannot execute " + dir_ + "/not-there"),
            std::string::npos)
      << missing.status();
}

}  // namespace
}  // namespace ddp::bench
