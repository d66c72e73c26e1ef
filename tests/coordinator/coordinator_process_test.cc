// CoordinatorProcess in this test process: real sockets, real signals (kill(getpid(), ...)),
// a real client. Every test starts a process object before any other thread exists in it, as
// the coordinator's main does, so signals reach the watcher.
#include "coordinator/coordinator_process.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "client/coordinator_client.h"
#include "common/exit_codes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;

TEST(ResolveJobIdentityTest, FlagsThenSlurmThenLocal) {
  const EnvMap slurm = {{"SLURM_JOB_ID", "4242"}, {"SLURM_NTASKS", "2"},
                        {"SLURM_PROCID", "0"},    {"SLURM_NNODES", "2"},
                        {"SLURM_NODEID", "0"},    {"SLURM_RESTART_COUNT", "3"}};
  const EnvMap broken = {{"SLURM_JOB_ID", "4242"}, {"SLURM_NTASKS", "two"}, {"SLURM_PROCID", "0"}};
  struct Case {
    const char* name;
    std::string job_id;
    int64_t generation;
    EnvMap env;
    bool ok;
    std::string want_job;  // "" : local-<pid>
    int64_t want_generation;
  };
  const std::vector<Case> cases = {
      {"flags win", "j", 5, slurm, true, "j", 5},
      {"from Slurm", "", -1, slurm, true, "4242", 3},
      {"generation from Slurm only", "j", -1, slurm, true, "j", 3},
      {"flags need no environment", "j", 0, broken, true, "j", 0},
      {"a broken environment is a usage error", "", -1, broken, false, "", 0},
      {"local", "", -1, {}, true, "", 0},
  };
  for (const Case& c : cases) {
    auto id = ResolveJobIdentity(c.job_id, c.generation, c.env);
    ASSERT_EQ(id.ok(), c.ok) << c.name << ": " << id.status();
    if (!c.ok) {
      EXPECT_TRUE(absl::IsInvalidArgument(id.status())) << c.name;
      EXPECT_THAT(std::string(id.status().message()), HasSubstr("SLURM_NTASKS")) << c.name;
      continue;
    }
    EXPECT_EQ(id->job_id, c.want_job.empty() ? LocalJobId() : c.want_job) << c.name;
    EXPECT_EQ(id->generation, c.want_generation) << c.name;
  }
}

class CoordinatorProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/coord_proc.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  CoordinatorOptions Options(absl::Duration linger) const {
    CoordinatorOptions o;
    o.world_size = 1;
    o.dist_file = dir_ + "/dist_file.proc";
    o.listen = "127.0.0.1:0";
    o.job_id = "proc";
    o.generation = 0;
    o.linger = linger;
    o.http_port = -1;
    return o;
  }
  std::unique_ptr<CoordinatorApi> Worker(const std::string& dist_file) {
    ConnectOptions c;
    c.dist_file = dist_file;
    c.expected_job_id = "proc";
    c.dist_file_timeout = absl::Seconds(5);
    c.rpc_timeout = absl::Seconds(5);
    auto api = ConnectToCoordinator(c);
    EXPECT_TRUE(api.ok()) << api.status();
    if (!api.ok()) return nullptr;
    WorkerIdentity who;
    who.host = "h";
    EXPECT_TRUE((*api)->Register(who, absl::Seconds(5)).ok());
    return *std::move(api);
  }
  // Waits until the job reaches `state` (or 5 s pass).
  static bool AwaitState(Job& job, JobState state) {
    const absl::Time end = absl::Now() + absl::Seconds(5);
    while (absl::Now() < end) {
      if (job.Status().state == state) return true;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return false;
  }

  std::string dir_;
};

TEST_F(CoordinatorProcessTest, RunsAJobToTheEndAndCleansUp) {
  auto p = CoordinatorProcess::Start(Options(absl::Milliseconds(200)), {});
  ASSERT_TRUE(p.ok()) << p.status();
  struct stat st;
  ASSERT_EQ(::stat((*p)->dist_file().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::thread worker([&] {
    auto api = Worker((*p)->dist_file());
    ASSERT_NE(api, nullptr);
    ASSERT_TRUE(api->ReportDone(absl::OkStatus()).ok());
  });
  EXPECT_EQ((*p)->RunUntilDone(), kExitOk);
  worker.join();
  EXPECT_NE(::stat((*p)->dist_file().c_str(), &st), 0) << "the dist_file is removed";
}

TEST_F(CoordinatorProcessTest, Usr1WhileRunningStopsGracefullyAndExitsResumable) {
  auto p = CoordinatorProcess::Start(Options(absl::Milliseconds(200)), {});
  ASSERT_TRUE(p.ok()) << p.status();
  std::unique_ptr<CoordinatorApi> api = Worker((*p)->dist_file());
  ASSERT_NE(api, nullptr);
  ASSERT_EQ(::kill(::getpid(), SIGUSR1), 0);
  ASSERT_TRUE(AwaitState((*p)->job(), JobState::kStopping));
  auto hb = api->Heartbeat({});
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(hb->command, Command::kCheckpointAndStop);
  EXPECT_EQ(hb->reason, "checkpoint and stop: SIGUSR1");
  ASSERT_TRUE(api->ReportDone(absl::CancelledError("stopped after checkpoint")).ok());
  EXPECT_EQ((*p)->RunUntilDone(), kExitResumable);
}

TEST_F(CoordinatorProcessTest, TermAbortsWhileRegisteringAndASecondSignalEndsTheLinger) {
  auto p = CoordinatorProcess::Start(Options(absl::Seconds(60)), {});
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);
  ASSERT_TRUE(AwaitState((*p)->job(), JobState::kFailed));
  EXPECT_EQ((*p)->job().Status().failure.kind, FailureKind::kOperatorStop);
  std::thread later([] {
    absl::SleepFor(absl::Milliseconds(300));
    ::kill(::getpid(), SIGTERM);
  });
  const absl::Time start = absl::Now();
  EXPECT_EQ((*p)->RunUntilDone(), kExitFailed);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "the linger was not cut short";
  later.join();
}

// A coordinator that dies (here: destroyed without finishing) is taken over by one started with
// resume_from_journal: the same job, nonce and tokens in a dist_file of a newer incarnation, and
// the worker's client follows it by itself (its next call finds the old address gone).
TEST_F(CoordinatorProcessTest, ARestartedCoordinatorResumesFromTheJournal) {
  const CoordinatorOptions first_options = Options(absl::Milliseconds(100));
  auto first = CoordinatorProcess::Start(first_options, {});
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string dist_file = (*first)->dist_file();
  std::unique_ptr<CoordinatorApi> api = Worker(dist_file);
  ASSERT_NE(api, nullptr);
  ASSERT_TRUE(api->CommitCheckpoint({0, 7, 70, "/ck/7.pt"}).ok());
  auto before = ReadDistFile(dist_file, {"proc", 0});
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->incarnation, 0);
  first->reset();  // gone without a word, as after SIGKILL: the dist_file and journal stay

  CoordinatorOptions resume = first_options;
  resume.resume_from_journal = true;
  auto second = CoordinatorProcess::Start(resume, {});
  ASSERT_TRUE(second.ok()) << second.status();
  auto after = ReadDistFile(dist_file, {"proc", 0});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->incarnation, 1);
  EXPECT_EQ(after->nonce, before->nonce);
  EXPECT_EQ(after->token, before->token);
  EXPECT_EQ(after->control_token, before->control_token);
  EXPECT_NE(after->grpc_address, before->grpc_address);
  const JobStatus s = (*second)->job().Status();
  EXPECT_EQ(s.state, JobState::kRunning);
  EXPECT_EQ(s.checkpoint_step, 7);
  auto hb = api->Heartbeat({});
  ASSERT_TRUE(hb.ok()) << hb.status();
  EXPECT_EQ(hb->command, Command::kContinue);
  ASSERT_TRUE(api->ReportDone(absl::OkStatus()).ok());
  EXPECT_EQ((*second)->RunUntilDone(), kExitOk);
  struct stat st;
  EXPECT_NE(::stat(JournalPath(dist_file).c_str(), &st), 0) << "a finished job leaves no journal";
}

TEST_F(CoordinatorProcessTest, ACorruptOrForeignJournalIsRefused) {
  const CoordinatorOptions options = Options(absl::Milliseconds(100));
  CoordinatorOptions resume = options;
  resume.resume_from_journal = true;
  {
    auto first = CoordinatorProcess::Start(options, {});
    ASSERT_TRUE(first.ok()) << first.status();
    std::unique_ptr<CoordinatorApi> api = Worker((*first)->dist_file());
    ASSERT_NE(api, nullptr);
  }
  const std::string journal = JournalPath(options.dist_file);
  const std::string saved = journal + ".saved";
  ASSERT_EQ(std::system(("cp -p '" + journal + "' '" + saved + "'").c_str()), 0);
  // Another coordinator of the job (a new nonce) publishes its own dist_file; the old journal
  // put back beside it belongs to another incarnation of the job, not to this file.
  {
    auto other = CoordinatorProcess::Start(options, {});
    ASSERT_TRUE(other.ok()) << other.status();
  }
  ASSERT_EQ(std::rename(saved.c_str(), journal.c_str()), 0);
  auto foreign = CoordinatorProcess::Start(resume, {});
  ASSERT_FALSE(foreign.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(foreign.status())) << foreign.status();
  EXPECT_THAT(std::string(foreign.status().message()), HasSubstr("belongs to job proc"));
  // A journal that is no journal at all.
  ASSERT_EQ(std::system(("printf 'garbage garbage garbage' > '" + journal + "'").c_str()), 0);
  auto corrupt = CoordinatorProcess::Start(resume, {});
  ASSERT_FALSE(corrupt.ok());
  EXPECT_THAT(std::string(corrupt.status().message()), HasSubstr("cannot resume"));
  // No journal: nothing to resume.
  ::unlink(journal.c_str());
  EXPECT_FALSE(CoordinatorProcess::Start(resume, {}).ok());
}

TEST_F(CoordinatorProcessTest, BadOptionsAreUsageErrors) {
  CoordinatorOptions o = Options(absl::ZeroDuration());
  o.world_size = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(CoordinatorProcess::Start(o, {}).status()));
  o = Options(absl::ZeroDuration());
  o.log_file = dir_ + "/missing-dir/log";
  EXPECT_TRUE(absl::IsInvalidArgument(CoordinatorProcess::Start(o, {}).status()));
}

}  // namespace
}  // namespace ddp
