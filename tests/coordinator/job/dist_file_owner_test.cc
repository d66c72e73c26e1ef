// One job per dist_file, with the real ddp-coordinator binary (from $DDP_BIN_DIR): a second job
// started on the dist_file of a live one is refused (exit 2, one line naming the job that holds
// it) and touches nothing of the first job's (dist_file, journal, log); the first job's own
// restart from its journal still works once it died, and a dead job's lock is taken over.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/dist_file.h"
#include "gtest/gtest.h"
#include "tests/testing/run_shell.h"

namespace ddp {
namespace {

using ::ddp::testing::RunShell;

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class DistFileOwnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("DDP_BIN_DIR");
    if (bin == nullptr) GTEST_SKIP() << "DDP_BIN_DIR is unset (run through ctest)";
    bin_ = bin;
    std::string tmpl = ::testing::TempDir() + "/dist_owner.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    dist_file_ = dir_ + "/shared";
  }
  void TearDown() override {
    for (pid_t pid : {a_, b_}) {
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
    if (!dir_.empty()) std::system(("rm -rf '" + dir_ + "'").c_str());
  }
  // Starts a coordinator of `job` on the shared dist_file; returns its pid.
  pid_t Start(const std::string& job, bool resume) {
    const std::string exe = bin_ + "/ddp-coordinator";
    const std::string log = dir_ + "/" + job + (resume ? ".resumed" : "") + ".stderr";
    const pid_t pid = ::fork();
    if (pid == 0) {
      std::freopen(log.c_str(), "w", stderr);
      ::execl(exe.c_str(), exe.c_str(), "--world-size", "2", "--job-id", job.c_str(), "--dist-file",
              dist_file_.c_str(), "--listen", "127.0.0.1:0", "--http-port", "-1", "--log-file",
              (dist_file_ + ".coordinator.log").c_str(),
              resume ? "--resume-from-journal" : "--linger", resume ? "--linger" : "0",
              resume ? "0" : nullptr, nullptr);
      ::_exit(127);
    }
    return pid;
  }

  std::string bin_;
  std::string dir_;
  std::string dist_file_;
  pid_t a_ = -1;
  pid_t b_ = -1;
};

TEST_F(DistFileOwnerTest, ASecondJobOnALiveJobsDistFileIsRefusedAndTouchesNothing) {
  a_ = Start("job-a", /*resume=*/false);
  auto published = WaitForDistFile(dist_file_, {"job-a", 0}, absl::Seconds(20));
  ASSERT_TRUE(published.ok()) << published.status();
  const std::string dist_before = ReadBytes(dist_file_);
  const std::string journal_before = ReadBytes(dist_file_ + ".journal");
  ASSERT_FALSE(journal_before.empty());

  std::string out;
  const int rc = RunShell(
      absl::StrCat(bin_, "/ddp-coordinator --world-size 2 --job-id job-b ", "--dist-file '",
                   dist_file_, "' --listen 127.0.0.1:0 ", "--http-port -1 --linger 0"),
      &out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("belongs to a job that is still running (job job-a generation 0"),
            std::string::npos)
      << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << "one line: " << out;
  EXPECT_EQ(ReadBytes(dist_file_), dist_before) << "job B replaced job A's dist_file";
  EXPECT_EQ(ReadBytes(dist_file_ + ".journal"), journal_before) << "job B touched A's journal";
  EXPECT_TRUE(ReadDistFile(dist_file_, {"job-a", 0}).ok());
  // A task of job B other than task 0 waits for B's file there: it is told at once, not at its
  // deadline, that another live job holds the path.
  const absl::Time waited = absl::Now();
  auto b_reader = WaitForDistFile(dist_file_, {"job-b", 0}, absl::Seconds(30));
  EXPECT_TRUE(absl::IsAlreadyExists(b_reader.status())) << b_reader.status();
  EXPECT_NE(b_reader.status().message().find("(job job-a generation 0"), std::string::npos)
      << b_reader.status();
  EXPECT_LT(absl::Now() - waited, absl::Seconds(5));
  // While probes run, job A's own coordinator still takes its lock over (below): a probe's
  // shared lock lasts a moment, and Acquire retries for a second before it refuses.
  std::atomic<bool> probing{true};
  std::thread prober([&] {
    while (probing.load()) (void)WaitForDistFile(dist_file_, {"job-a", 0}, absl::Seconds(1));
  });

  // Job A's coordinator dies; its own restart from the journal takes the lock over.
  ::kill(a_, SIGKILL);
  ::waitpid(a_, nullptr, 0);
  a_ = Start("job-a", /*resume=*/true);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  absl::StatusOr<DistFileContents> resumed;
  do {
    resumed = ReadDistFile(dist_file_, {"job-a", 0});
    if (resumed.ok() && resumed->incarnation == 1) break;
    absl::SleepFor(absl::Milliseconds(50));
  } while (absl::Now() < deadline);
  probing = false;
  prober.join();
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->incarnation, 1) << ReadBytes(dir_ + "/job-a.resumed.stderr");
  EXPECT_EQ(resumed->nonce, published->nonce);

  // Still live: B is refused again. Once A is gone for good, a new job takes the path.
  EXPECT_EQ(RunShell(absl::StrCat(bin_, "/ddp-coordinator --world-size 2 --job-id job-b ",
                                  "--dist-file '", dist_file_, "' --http-port -1 --linger 0"),
                     &out),
            2)
      << out;
  ::kill(a_, SIGKILL);
  ::waitpid(a_, nullptr, 0);
  a_ = -1;
  b_ = Start("job-b", /*resume=*/false);
  auto taken = WaitForDistFile(dist_file_, {"job-b", 0}, absl::Seconds(20));
  EXPECT_TRUE(taken.ok()) << taken.status() << ReadBytes(dir_ + "/job-b.stderr");
}

}  // namespace
}  // namespace ddp
