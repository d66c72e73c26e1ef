#include "bench/loadgen/agent_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace ddp::bench {
namespace {

absl::Status Errno(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

}  // namespace

absl::StatusOr<std::unique_ptr<AgentProcess>> AgentProcess::Start(const Options& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("no command");
  const int log = open(options.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log < 0) return Errno(absl::StrCat("open ", options.log_path));
  int in[2] = {-1, -1};
  int out[2] = {-1, -1};
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
    absl::Status s = Errno("pipe2");
    for (int* fd : {&in[0], &in[1], &out[0], &out[1]}) CloseFd(fd);
    close(log);
    return s;
  }
  SpawnOptions spawn;
  spawn.argv = options.argv;
  spawn.stdin_fd = in[0];
  spawn.stdout_fd = options.stdout_to_log ? log : out[1];
  spawn.stderr_fd = log;
  spawn.stop_grace = absl::ZeroDuration();  // the destructor kills at once
  absl::StatusOr<std::unique_ptr<ChildProcess>> process = ChildProcess::Spawn(std::move(spawn));
  close(log);
  CloseFd(&in[0]);
  CloseFd(&out[1]);
  if (!process.ok()) {
    CloseFd(&in[1]);
    CloseFd(&out[0]);
    return process.status();
  }
  std::unique_ptr<AgentProcess> child(new AgentProcess());
  child->process_ = *std::move(process);
  child->stdin_fd_ = in[1];
  child->stdout_fd_ = out[0];
  const std::string& exe = options.argv[0];
  child->name_ = absl::StrCat(exe.substr(exe.rfind('/') + 1), "[", child->pid(), "]");
  return child;
}

AgentProcess::~AgentProcess() {
  Kill();
  CloseFd(&stdin_fd_);
  CloseFd(&stdout_fd_);
}

absl::Status AgentProcess::WriteLine(absl::string_view line) {
  const std::string data = absl::StrCat(line, "\n");
  size_t done = 0;
  while (done < data.size()) {
    // A pipe write of a short line does not block unless the child stopped reading its stdin
    // with a full pipe buffer, which the protocol (one reply per command) never allows.
    const ssize_t n = write(stdin_fd_, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno(absl::StrCat("write to ", name_, " (", State(), ")"));
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> AgentProcess::ReadLine(absl::Time deadline) {
  while (true) {
    const size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat("no reply from ", name_, " (", State(), ")"));
    }
    pollfd p{stdout_fd_, POLLIN, 0};
    const int64_t ms = std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1000);
    const int r = poll(&p, 1, static_cast<int>(ms));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Errno("poll");
    if (r == 0) continue;
    char chunk[4096];
    const ssize_t n = read(stdout_fd_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno(absl::StrCat("read from ", name_));
    if (n == 0) {
      // Closed: give the child a moment to be reaped so the message says how it ended.
      for (int i = 0; i < 50 && State() == "running"; ++i) absl::SleepFor(absl::Milliseconds(10));
      return absl::UnavailableError(absl::StrCat(name_, " closed its output (", State(), ")"));
    }
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

absl::StatusOr<AgentReply> AgentProcess::ReadReply(absl::Time deadline) {
  ASSIGN_OR_RETURN(const std::string line, ReadLine(deadline));
  auto reply = AgentReply::Parse(line);
  if (!reply.ok()) {
    return absl::Status(reply.status().code(), absl::StrCat(name_, ": ", reply.status().message()));
  }
  return reply;
}

absl::StatusOr<AgentReply> AgentProcess::Call(absl::string_view command, absl::Time deadline) {
  RETURN_IF_ERROR(WriteLine(command));
  return ReadReply(deadline);
}

std::string AgentProcess::State() {
  if (!process_->Poll()) return "running";
  const ExitStatus& st = *process_->exit_status();
  if (st.signaled()) return absl::StrCat("signal ", st.signal());
  return absl::StrCat("exit ", st.code());
}

void AgentProcess::Kill() {
  if (process_ == nullptr || !process_->running()) return;
  process_->Signal(SIGKILL);
  process_->WaitUntil(absl::Now() + ChildProcess::kKillWait);
}

}  // namespace ddp::bench
