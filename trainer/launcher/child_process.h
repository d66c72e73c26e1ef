// One child process that this process started (fork + exec) and owns: it is signalled, polled
// and reaped with bounded waits, and the destructor stops and reaps one that still runs
// (SIGTERM, a grace period, then SIGKILL). No wait here is unbounded.
//
// Thread safety: not thread-safe; one owner thread. Spawn is fork-safe in a threaded process
// (only async-signal-safe calls run between fork and exec), so a respawn after gRPC or torch
// threads exist is sound.
#ifndef SLURM_DDP_TRAINER_LAUNCHER_CHILD_PROCESS_H_
#define SLURM_DDP_TRAINER_LAUNCHER_CHILD_PROCESS_H_

#include <signal.h>
#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ddp {

// How a child ended: the raw wait(2) status and what it means.
class ExitStatus {
 public:
  explicit ExitStatus(int wait_status) : wait_status_(wait_status) {}
  bool signaled() const;
  int signal() const;  // 0 unless signaled()
  // The exit code a shell would report: the code, or 128 + signal for a killed child.
  int code() const;
  // "exited with code 3", "killed by signal 9".
  std::string Describe() const;
  int wait_status() const { return wait_status_; }

 private:
  int wait_status_;
};

struct SpawnOptions {
  // argv[0] is the program's path (execve: no PATH search).
  std::vector<std::string> argv;
  // NAME=VALUE entries added to (after) this process's environment.
  std::vector<std::string> extra_env;
  // The signal mask the child starts with (a launcher blocks signals it takes synchronously;
  // its children must not inherit that). Empty mask when unset.
  std::optional<sigset_t> child_mask;
  // PR_SET_PDEATHSIG(SIGKILL): the child dies with this process, whatever happens to it. (Linux
  // sends it when the *thread* that called Spawn ends: spawn from a thread that lives as long as
  // the children, as the launcher's main thread does.)
  bool die_with_parent = true;
  // Close-on-exec descriptors this child keeps across exec (the same numbers); the caller owns
  // them. E.g. the worker's end of its heartbeat relay socket.
  std::vector<int> inherit_fds;
  // Descriptors the child gets as its stdin, stdout and stderr (dup2 before exec); -1 keeps this
  // process's. The caller owns them.
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  // How long the destructor waits after SIGTERM before it sends SIGKILL.
  absl::Duration stop_grace = absl::Seconds(5);
};

// Every process below `pid` (children, their children, ...), from /proc/<pid>/task/*/children;
// empty when /proc cannot tell.
std::vector<pid_t> Descendants(pid_t pid);

class ChildProcess {
 public:
  // After SIGKILL, how long Stop waits for the kernel to end the child (a process in
  // uninterruptible sleep may outlast it; Stop then reports DEADLINE_EXCEEDED).
  static constexpr absl::Duration kKillWait = absl::Seconds(5);

  // Starts `options.argv`. Fails (and leaves no child) when the program cannot be executed:
  // the child reports exec's errno through a close-on-exec pipe.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(SpawnOptions options);

  // Stops (SIGTERM, stop_grace, SIGKILL) and reaps the child if it still runs (bounded:
  // stop_grace + kKillWait at most).
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  const SpawnOptions& options() const { return options_; }
  // True until the child has been reaped.
  bool running() const { return !exit_status_.has_value(); }
  // Set once the child has been reaped.
  const std::optional<ExitStatus>& exit_status() const { return exit_status_; }

  // Reaps the child if it has ended; never blocks. Returns true once it has ended.
  bool Poll();
  // Waits until the child ends or `deadline` passes. Returns true if it ended.
  bool WaitUntil(absl::Time deadline);
  // Sends `sig` while the child runs; after it was reaped nothing is sent (its pid may belong
  // to another process by then).
  void Signal(int sig);
  // SIGTERM (and SIGCONT, so a stopped child can act on it), wait up to `grace`, then SIGKILL
  // and wait up to kKillWait. Returns how the child ended, or DEADLINE_EXCEEDED if even SIGKILL
  // did not end it in time (it stays owned; the destructor tries again, bounded).
  absl::StatusOr<ExitStatus> Stop(absl::Duration grace);
  // Gives up on a child that outlived SIGKILL (uninterruptible sleep): the destructor no longer
  // waits for it. PR_SET_PDEATHSIG still ends it with this process.
  void Abandon() { abandoned_ = true; }

 private:
  ChildProcess(pid_t pid, SpawnOptions options) : pid_(pid), options_(std::move(options)) {}

  pid_t pid_;
  SpawnOptions options_;
  std::optional<ExitStatus> exit_status_;
  bool abandoned_ = false;
};

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_LAUNCHER_CHILD_PROCESS_H_
