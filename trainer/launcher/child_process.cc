#include "trainer/launcher/child_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/exit_codes.h"

extern char** environ;

namespace ddp {

std::vector<pid_t> Descendants(pid_t pid) {
  // Every process's parent, from /proc/<p>/stat: "pid (comm) state ppid ..."; comm may hold
  // spaces and parentheses, so the fields are read after its last ')'.
  std::multimap<pid_t, pid_t> children;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return {};
  while (const dirent* d = readdir(proc)) {
    char* end = nullptr;
    const long p = std::strtol(d->d_name, &end, 10);
    if (end == d->d_name || *end != '\0' || p <= 0) continue;
    std::ifstream in(absl::StrCat("/proc/", d->d_name, "/stat"));
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    std::string state;
    long ppid = 0;
    if (rest >> state >> ppid) children.emplace(static_cast<pid_t>(ppid), static_cast<pid_t>(p));
  }
  closedir(proc);
  std::vector<pid_t> out;
  std::vector<pid_t> todo = {pid};
  while (!todo.empty()) {
    const pid_t parent = todo.back();
    todo.pop_back();
    const auto [first, last] = children.equal_range(parent);
    for (auto it = first; it != last; ++it) {
      out.push_back(it->second);
      todo.push_back(it->second);
    }
  }
  return out;
}
namespace {

// How long Spawn waits for the child to exec (or to report that it could not). A child that
// neither execs nor fails within it (stopped between fork and exec) is kept and supervised.
constexpr absl::Duration kExecReportWait = absl::Seconds(10);

// Owns a pipe's two descriptors.
class Pipe {
 public:
  Pipe() = default;
  ~Pipe() {
    CloseRead();
    CloseWrite();
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  absl::Status Open() {
    if (pipe2(fds_, O_CLOEXEC) != 0) {
      return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }
  int read_fd() const { return fds_[0]; }
  int write_fd() const { return fds_[1]; }
  void CloseRead() { Close(&fds_[0]); }
  void CloseWrite() { Close(&fds_[1]); }

 private:
  static void Close(int* fd) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
  int fds_[2] = {-1, -1};
};

// Reads exec's errno from the child's report pipe: 0 when the pipe closed without a report
// (exec succeeded), -1 when the wait ran out.
int ReadExecReport(int fd, absl::Time deadline) {
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return -1;
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // re-check the deadline
    int child_errno = 0;
    const ssize_t n = ::read(fd, &child_errno, sizeof(child_errno));
    if (n < 0 && errno == EINTR) continue;
    return n == static_cast<ssize_t>(sizeof(child_errno)) ? child_errno : 0;
  }
}

}  // namespace

bool ExitStatus::signaled() const { return WIFSIGNALED(wait_status_); }

int ExitStatus::signal() const { return signaled() ? WTERMSIG(wait_status_) : 0; }

int ExitStatus::code() const {
  if (WIFEXITED(wait_status_)) return WEXITSTATUS(wait_status_);
  if (WIFSIGNALED(wait_status_)) return 128 + WTERMSIG(wait_status_);
  return kExitFailed;  // neither exited nor killed: not an end status
}

std::string ExitStatus::Describe() const {
  if (signaled()) return absl::StrCat("killed by signal ", signal());
  return absl::StrCat("exited with code ", code());
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(SpawnOptions options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("no program to run");
  // Everything the child needs is built before fork: between fork and exec only
  // async-signal-safe calls run.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  for (const std::string& e : options.extra_env) env_strings.push_back(e);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = options.argv;
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  sigset_t mask;
  if (options.child_mask.has_value()) {
    mask = *options.child_mask;
  } else {
    sigemptyset(&mask);
  }

  Pipe report;
  if (absl::Status opened = report.Open(); !opened.ok()) return opened;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("fork for ", options.argv[0], ": ", std::strerror(errno)));
  }
  if (pid == 0) {
    if (options.die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
    }
    ::sigprocmask(SIG_SETMASK, &mask, nullptr);
    for (int fd : options.inherit_fds) ::fcntl(fd, F_SETFD, 0);
    // dup2 clears close-on-exec on the new descriptor.
    if (options.stdin_fd >= 0) ::dup2(options.stdin_fd, STDIN_FILENO);
    if (options.stdout_fd >= 0) ::dup2(options.stdout_fd, STDOUT_FILENO);
    if (options.stderr_fd >= 0) ::dup2(options.stderr_fd, STDERR_FILENO);
    ::execve(argv[0], argv.data(), envp.data());
    const int exec_errno = errno;
    ssize_t ignored = ::write(report.write_fd(), &exec_errno, sizeof(exec_errno));
    (void)ignored;
    ::_exit(127);
  }
  report.CloseWrite();
  std::unique_ptr<ChildProcess> child(new ChildProcess(pid, std::move(options)));
  const int exec_errno = ReadExecReport(report.read_fd(), absl::Now() + kExecReportWait);
  if (exec_errno > 0) {
    child->WaitUntil(absl::Now() + kKillWait);  // it exits at once (127)
    return absl::FailedPreconditionError(
        absl::StrCat("cannot execute ", child->options_.argv[0], ": ", std::strerror(exec_errno)));
  }
  return child;
}

ChildProcess::~ChildProcess() {
  if (running() && !abandoned_) (void)Stop(options_.stop_grace);
}

bool ChildProcess::Poll() {
  if (!running()) return true;
  while (true) {
    int status = 0;
    const pid_t got = ::waitpid(pid_, &status, WNOHANG);
    if (got == pid_) {
      exit_status_.emplace(status);
      return true;
    }
    if (got == 0) return false;
    if (errno == EINTR) continue;
    // ECHILD: reaped elsewhere (nothing here does that); count it as a failed end.
    exit_status_.emplace(W_EXITCODE(1, 0));
    return true;
  }
}

bool ChildProcess::WaitUntil(absl::Time deadline) {
  absl::Duration nap = absl::Milliseconds(1);
  while (!Poll()) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    absl::SleepFor(std::min(nap, left));
    nap = std::min(nap * 2, absl::Milliseconds(50));
  }
  return true;
}

void ChildProcess::Signal(int sig) {
  if (!Poll()) ::kill(pid_, sig);
}

absl::StatusOr<ExitStatus> ChildProcess::Stop(absl::Duration grace) {
  if (!running()) return *exit_status_;
  Signal(SIGTERM);
  Signal(SIGCONT);
  if (WaitUntil(absl::Now() + grace)) return *exit_status_;
  Signal(SIGKILL);
  if (WaitUntil(absl::Now() + kKillWait)) return *exit_status_;
  return absl::DeadlineExceededError(
      absl::StrCat("pid ", pid_, " (", absl::StrJoin(options_.argv, " ").substr(0, 200),
                   ") still runs ", absl::FormatDuration(kKillWait), " after SIGKILL"));
}

}  // namespace ddp
