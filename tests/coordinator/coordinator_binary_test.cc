// Runs the real ddp-coordinator and ddpctl binaries (from $DDP_BIN_DIR).
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/dist_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/run_shell.h"
#include "tests/testing/sanitizers.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;

using ::ddp::testing::RunShell;

class CoordinatorBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("DDP_BIN_DIR");
    if (bin == nullptr) GTEST_SKIP() << "DDP_BIN_DIR is unset (run through ctest)";
    bin_ = bin;
    std::string tmpl = ::testing::TempDir() + "/coord_bin.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    dist_file_ = dir_ + "/dist_file.bin-test";
  }
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (!dir_.empty()) std::system(("rm -rf '" + dir_ + "'").c_str());
  }
  void StartCoordinator(const char* linger = "10", const char* heap_reserve_mb = "-1") {
    std::string exe = bin_ + "/ddp-coordinator";
    std::string log = dir_ + "/coordinator.log";
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      std::freopen(log.c_str(), "w", stderr);
      ::execl(exe.c_str(), exe.c_str(), "--world-size", "8", "--job-id", "bin-test", "--dist-file",
              dist_file_.c_str(), "--listen", "127.0.0.1:0", "--linger", linger,
              "--heap-reserve-mb", heap_reserve_mb, nullptr);
      ::_exit(127);
    }
    auto file = WaitForDistFile(dist_file_, {"bin-test", 0}, absl::Seconds(20));
    ASSERT_TRUE(file.ok()) << file.status();
  }
  std::string Ctl(const std::string& dist_file, const std::string& args, int* rc) {
    std::string out;
    *rc = RunShell(absl::StrCat(bin_, "/ddpctl --timeout 3 --dist-file '", dist_file, "' ", args),
                   &out);
    return out;
  }

  std::string bin_;
  std::string dir_;
  std::string dist_file_;
  pid_t pid_ = -1;
};

TEST_F(CoordinatorBinaryTest, PublishesPrivateDistFileAndServesStatus) {
  StartCoordinator();
  struct stat st;
  ASSERT_EQ(::stat(dist_file_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  int rc = 0;
  std::string json = Ctl(dist_file_, "status --json", &rc);
  EXPECT_EQ(rc, 0) << json;
  EXPECT_THAT(json, HasSubstr("\"state\":\"REGISTERING\""));
  EXPECT_THAT(json, HasSubstr("\"world_size\":8"));
  EXPECT_THAT(json, HasSubstr("\"registered\":0"));
  EXPECT_THAT(json, HasSubstr("\"job_id\":\"bin-test\""));

  // A copy with a forged view token (the one `status` uses) is refused; the coordinator keeps
  // serving.
  std::ifstream in(dist_file_);
  std::stringstream text;
  text << in.rdbuf();
  std::string forged = text.str();
  size_t pos = forged.find("\nview_token=");
  ASSERT_NE(pos, std::string::npos);
  forged.replace(pos + 12, 64, std::string(64, 'f'));
  std::string forged_path = dir_ + "/forged";
  { std::ofstream(forged_path) << forged; }
  ::chmod(forged_path.c_str(), 0600);
  std::string refused = Ctl(forged_path, "status --json", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_THAT(refused, HasSubstr("wrong authorization token"));
  EXPECT_EQ(std::count(refused.begin(), refused.end(), '\n'), 1) << refused;

  std::string human = Ctl(dist_file_, "status", &rc);
  EXPECT_EQ(rc, 0) << human;
  EXPECT_THAT(human, HasSubstr("REGISTERING"));
  EXPECT_THAT(human, HasSubstr("0/8 registered"));
  EXPECT_EQ(::waitpid(pid_, nullptr, WNOHANG), 0) << "coordinator exited";
}

// Slurm signals every process of a job step: SIGUSR1 (time limit near) must not kill the
// coordinator. Once the job has ended, a signal ends the linger at once.
TEST_F(CoordinatorBinaryTest, SurvivesUsr1AndASignalEndsTheLinger) {
  StartCoordinator("60");
  ASSERT_EQ(::kill(pid_, SIGUSR1), 0);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(::waitpid(pid_, nullptr, WNOHANG), 0) << "coordinator died of SIGUSR1";
  int rc = 0;
  std::string json = Ctl(dist_file_, "status --json", &rc);
  EXPECT_EQ(rc, 0) << json;
  EXPECT_THAT(json, HasSubstr("\"state\":\"REGISTERING\""));

  // SIGTERM while registering aborts the job; the coordinator then lingers (60 s) ...
  ASSERT_EQ(::kill(pid_, SIGTERM), 0);
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(::waitpid(pid_, nullptr, WNOHANG), 0) << "no linger";
  json = Ctl(dist_file_, "status --json", &rc);
  EXPECT_THAT(json, HasSubstr("\"state\":\"FAILED\""));
  // ... until the next signal, which ends it within a few seconds (server shutdown included).
  const absl::Time sent = absl::Now();
  ASSERT_EQ(::kill(pid_, SIGTERM), 0);
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) == 0 && absl::Now() - sent < absl::Seconds(10)) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(WIFEXITED(status)) << "still running 10 s after the second SIGTERM";
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_LT(absl::Now() - sent, absl::Seconds(5));
  pid_ = -1;
}

TEST_F(CoordinatorBinaryTest, HelpAndBadFlags) {
  std::string out;
  EXPECT_EQ(RunShell(bin_ + "/ddp-coordinator --help", &out), 0);
  EXPECT_THAT(out, HasSubstr("--world-size"));
  EXPECT_NE(RunShell(bin_ + "/ddp-coordinator --world-size 2 --bogus", &out), 0);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(RunShell(bin_ + "/ddp-coordinator", &out), 0);
  EXPECT_THAT(out, HasSubstr("world-size"));
}

// The process's resident set in MiB (/proc/<pid>/status VmRSS), -1 when unreadable.
int64_t ResidentMiB(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6) / 1024;
  }
  return -1;
}

TEST_F(CoordinatorBinaryTest, HeapReserveIsResidentBeforeWorkersComeAndLogged) {
  StartCoordinator("10", "160");
  const int64_t rss = ResidentMiB(pid_);
  EXPECT_GE(rss, 160) << "the reserve is not resident";
  // The dist_file (which StartCoordinator waits for) is published before the start-up's log
  // lines are written: read the log until they are there (a full run once read it empty).
  std::stringstream log;
  for (const absl::Time give_up = absl::Now() + absl::Seconds(10);;) {
    std::ifstream in(dir_ + "/coordinator.log");
    log.str("");
    log << in.rdbuf();
    if (log.str().find("made resident") != std::string::npos || absl::Now() > give_up) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_THAT(log.str(), HasSubstr("160 MiB made resident for the rendezvous"));
  // The regular build links tcmalloc (coordinator/CMakeLists.txt): a link that dropped it (an
  // as-needed linker: nothing names its symbols) would fall back to glibc's malloc unnoticed.
  if (!::ddp::testing::kUnderSanitizer) {
    EXPECT_THAT(log.str(), HasSubstr("heap (tcmalloc "));
  }
}

TEST_F(CoordinatorBinaryTest, NoHeapReserveWithZero) {
  StartCoordinator("10", "0");
  const int64_t rss = ResidentMiB(pid_);
  EXPECT_GE(rss, 1);
  EXPECT_LT(rss, 120) << "0 should reserve nothing";
  std::string out;
  EXPECT_EQ(RunShell(bin_ + "/ddp-coordinator --world-size 2 --heap-reserve-mb -2", &out), 2);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_THAT(out, HasSubstr("heap-reserve-mb"));
}

TEST_F(CoordinatorBinaryTest, RegistrationTimeoutExitsNonZeroNamingTheGap) {
  std::string out;
  int rc =
      RunShell(absl::StrCat(bin_, "/ddp-coordinator --world-size 2 --job-id t --dist-file '", dir_,
                            "/df' --listen 127.0.0.1:0 --registration-timeout 0.5 "
                            "--linger 0"),
               &out);
  EXPECT_EQ(rc, 1);
  EXPECT_THAT(out, HasSubstr("registration timed out after 500ms: 0 of 2 workers registered"));
}

}  // namespace
}  // namespace ddp
