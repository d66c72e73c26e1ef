// A process the scale driver starts and talks to: commands go to its stdin, one reply line per
// command comes back on its stdout (bench/loadgen/agent_line.h); its stderr (and, if asked, its
// stdout) is appended to a log file. The child gets SIGKILL if the driver dies
// (PR_SET_PDEATHSIG); the destructor kills and reaps it, so no run leaves a process behind. The
// fork, exec and reaping are the launcher's (trainer/launcher/child_process.h).
// Thread-compatible: one thread drives a given AgentProcess.
#ifndef SLURM_DDP_BENCH_LOADGEN_AGENT_PROCESS_H_
#define SLURM_DDP_BENCH_LOADGEN_AGENT_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "bench/loadgen/agent_line.h"
#include "trainer/launcher/child_process.h"

namespace ddp::bench {

class AgentProcess {
 public:
  struct Options {
    std::vector<std::string> argv;  // argv[0] is the executable's path
    std::string log_path;           // stderr is appended here
    bool stdout_to_log = false;     // true: stdout too (no reply lines); false: a pipe to us
  };

  // Forks and execs; FAILED_PRECONDITION naming the program when it cannot be executed.
  static absl::StatusOr<std::unique_ptr<AgentProcess>> Start(const Options& options);
  ~AgentProcess();
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;

  pid_t pid() const { return process_->pid(); }
  const std::string& name() const { return name_; }

  absl::Status WriteLine(absl::string_view line);
  // The next stdout line without its newline. DEADLINE_EXCEEDED if none arrives by `deadline`;
  // UNAVAILABLE (with how the child ended) if it closed its stdout.
  absl::StatusOr<std::string> ReadLine(absl::Time deadline);
  // ReadLine + AgentReply::Parse; errors name the child.
  absl::StatusOr<AgentReply> ReadReply(absl::Time deadline);
  // WriteLine(command) + ReadReply.
  absl::StatusOr<AgentReply> Call(absl::string_view command, absl::Time deadline);

  // "running", or how it ended ("exit 1", "signal 9"); reaps it if it has ended.
  std::string State();
  // SIGKILL and reap (bounded: SIGKILL cannot be ignored). Idempotent.
  void Kill();

 private:
  AgentProcess() = default;

  std::unique_ptr<ChildProcess> process_;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  std::string name_;
  std::string buffer_;  // stdout bytes read past the last returned line
};

}  // namespace ddp::bench

#endif  // SLURM_DDP_BENCH_LOADGEN_AGENT_PROCESS_H_
