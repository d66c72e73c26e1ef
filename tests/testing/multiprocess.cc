#include "tests/testing/multiprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

extern char** environ;

namespace ddp::testing {
namespace {

int EnvInt(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? -1 : std::atoi(v);
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  return out;
}

}  // namespace

bool IsChild() { return std::getenv("DDP_TEST_RANK") != nullptr; }
int ChildRank() { return EnvInt("DDP_TEST_RANK"); }
int ChildWorldSize() { return EnvInt("DDP_TEST_WORLD_SIZE"); }
std::string ChildStorePath() {
  const char* v = std::getenv("DDP_TEST_STORE");
  return v == nullptr ? "" : v;
}

std::vector<RankResult> RunRanks(
    int world_size, absl::Duration timeout,
    const std::vector<std::pair<std::string, std::string>>& extra_env) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string filter =
      absl::StrCat("--gtest_filter=", info->test_suite_name(), ".", info->name());
  static int call = 0;
  // POSIX, not std::filesystem: libtorch.so exports its own, partly broken, std::filesystem.
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string store = absl::StrCat(tmpdir != nullptr && *tmpdir ? tmpdir : "/tmp",
                                         "/ddp-test-store-", getpid(), "-", call++);
  unlink(store.c_str());

  struct Child {
    pid_t pid;
    std::string log;
  };
  std::vector<Child> children;
  for (int rank = 0; rank < world_size; ++rank) {
    std::string log = absl::StrCat(store, ".rank", rank, ".log");
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
    env_strings.push_back(absl::StrCat("DDP_TEST_RANK=", rank));
    env_strings.push_back(absl::StrCat("DDP_TEST_WORLD_SIZE=", world_size));
    env_strings.push_back(absl::StrCat("DDP_TEST_STORE=", store));
    for (const auto& [k, v] : extra_env) env_strings.push_back(absl::StrCat(k, "=", v));
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string exe = "/proc/self/exe";
    std::vector<char*> argv = {exe.data(), const_cast<char*>(filter.c_str()), nullptr};

    pid_t pid = fork();
    if (pid == 0) {
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
      }
      setpgid(0, 0);
      // A rank stands in for a ddp-trainer worker, which ignores SIGPIPE (trainer/app/main.cc):
      // Gloo writes to its peers' sockets without MSG_NOSIGNAL, and a write to a peer the test
      // SIGKILLed must fail with EPIPE, not kill the writer (it did, about 1 run in 10, in
      // process_group_handle_test's SurvivorsOfASigkilledPeerRebuildUnderANewPrefix).
      signal(SIGPIPE, SIG_IGN);  // kept across execve
      execve(exe.c_str(), argv.data(), envp.data());
      _exit(127);
    }
    children.push_back({pid, log});
  }

  std::vector<RankResult> results(world_size);
  const absl::Time deadline = absl::Now() + timeout;
  int remaining = world_size;
  std::vector<bool> done(world_size, false);
  while (remaining > 0) {
    for (int r = 0; r < world_size; ++r) {
      if (done[r]) continue;
      int status = 0;
      pid_t got = waitpid(children[r].pid, &status, WNOHANG);
      if (got == children[r].pid) {
        done[r] = true;
        --remaining;
        results[r].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (WIFSIGNALED(status)) results[r].term_signal = WTERMSIG(status);
      }
    }
    if (remaining > 0 && absl::Now() > deadline) {
      for (int r = 0; r < world_size; ++r) {
        if (done[r]) continue;
        kill(-children[r].pid, SIGKILL);
        kill(children[r].pid, SIGKILL);
        waitpid(children[r].pid, nullptr, 0);
        done[r] = true;
        results[r].timed_out = true;
        --remaining;
      }
    }
    if (remaining > 0) usleep(20 * 1000);
  }
  for (int r = 0; r < world_size; ++r) {
    results[r].rank = r;
    int fd = open(children[r].log.c_str(), O_RDONLY);
    if (fd >= 0) {
      results[r].output = ReadAll(fd);
      close(fd);
    }
    if (results[r].term_signal != 0) {
      absl::StrAppend(&results[r].output, "\n(killed by signal ", results[r].term_signal, ", ",
                      strsignal(results[r].term_signal), ")\n");
    }
    unlink(children[r].log.c_str());
  }
  unlink(store.c_str());
  return results;
}

}  // namespace ddp::testing
