#include "trainer/app/launcher.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

extern char** environ;

namespace ddp {
namespace {

constexpr int kForwardedSignals[] = {SIGTERM, SIGUSR1, SIGINT};

void Log(const std::string& task, const std::string& line) {
  std::fprintf(stderr, "[ddp-trainer %s] %s\n", task.c_str(), line.c_str());
}

std::string SelfDir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

// fork + exec with the parent-death signal set, so no child outlives this task, and the
// launcher's blocked signals restored to default.
pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
            const sigset_t& original_mask) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  for (const auto& e : extra_env) env_strings.push_back(e);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (auto& s : args) cargv.push_back(s.data());
  cargv.push_back(nullptr);

  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
  sigprocmask(SIG_SETMASK, &original_mask, nullptr);
  execve(cargv[0], cargv.data(), envp.data());
  std::fprintf(stderr, "ddp-trainer: cannot execute %s: %s\n", cargv[0], std::strerror(errno));
  _exit(127);
}

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kExitFailed;
}

std::string Describe(int status) {
  if (WIFSIGNALED(status)) return absl::StrCat("killed by signal ", WTERMSIG(status));
  return absl::StrCat("exited with code ", ExitCodeOf(status));
}

}  // namespace

int RunLauncher(const LaunchPlan& plan, const TrainerConfig& config, int argc, char** argv,
                const LostReporter& report_lost) {
  const WorkerPlacement& base = plan.base;
  const std::string task =
      base.local_mode ? "local" : absl::StrCat("node ", base.node_rank, " task");

  // Signals are taken synchronously (sigtimedwait) so that forwarding them is race-free.
  sigset_t wanted, original;
  sigemptyset(&wanted);
  for (int s : kForwardedSignals) sigaddset(&wanted, s);
  sigaddset(&wanted, SIGCHLD);
  sigprocmask(SIG_BLOCK, &wanted, &original);

  pid_t coordinator = -1;
  if (plan.start_coordinator) {
    std::remove(base.coordinator_log.c_str());
    std::vector<std::string> cargv = {
        SelfDir() + "/ddp-coordinator",
        "--world-size",
        absl::StrCat(base.world_size),
        "--dist-file",
        base.dist_file,
        "--job-id",
        base.job_id,
        "--generation",
        absl::StrCat(base.generation),
        "--registration-timeout",
        absl::StrCat(config.registration_timeout_s),
        "--heartbeat-timeout",
        absl::StrCat(config.heartbeat_timeout_s),
        "--log-file",
        base.coordinator_log,
    };
    if (base.local_mode) {
      cargv.push_back("--listen");
      cargv.push_back("127.0.0.1:0");
    }
    coordinator = Spawn(cargv, {}, original);
    Log(task, absl::StrCat("started coordinator (pid ", coordinator, ", ", base.world_size,
                           " workers, ", plan.mode, "); log: ", base.coordinator_log));
  }

  std::vector<std::string> wargv;
  wargv.push_back("/proc/self/exe");
  for (int i = 1; i < argc; ++i) wargv.emplace_back(argv[i]);
  wargv.emplace_back("--internal-worker");
  struct Worker {
    int local_rank;
    pid_t pid;
    bool running;
    int status;
  };
  std::vector<Worker> workers;
  for (int local_rank : plan.local_ranks) {
    WorkerPlacement p = base;
    p.local_rank = local_rank;
    workers.push_back({local_rank, Spawn(wargv, PlacementEnv(p), original), true, 0});
  }

  int result = kExitOk;
  bool stopping = false;   // a worker failed: the others are being stopped
  bool forwarded = false;  // a signal was forwarded to the workers
  absl::Time kill_at = absl::InfiniteFuture();
  int running = static_cast<int>(workers.size());
  while (running > 0) {
    timespec tick{0, 200 * 1000 * 1000};
    const int sig = sigtimedwait(&wanted, nullptr, &tick);
    if (sig == SIGTERM || sig == SIGUSR1 || sig == SIGINT) {
      Log(task, absl::StrCat("received ", strsignal(sig), "; forwarding to workers"));
      forwarded = true;
      for (const Worker& w : workers) {
        if (w.running) kill(w.pid, sig);
      }
    }
    for (Worker& w : workers) {
      if (!w.running) continue;
      int status = 0;
      if (waitpid(w.pid, &status, WNOHANG) != w.pid) continue;
      w.running = false;
      w.status = status;
      --running;
      const int code = ExitCodeOf(status);
      if (code == kExitOk) continue;
      if (code == kExitResumable) {
        if (result == kExitOk) result = kExitResumable;
        continue;
      }
      const bool first = !stopping;
      if (first) {
        stopping = true;
        for (const Worker& other : workers) {
          if (other.running) kill(other.pid, SIGTERM);
        }
        kill_at = absl::Now() + absl::Seconds(10);
      }
      std::string rank;
      // Only a death nobody asked for: not a worker we stopped, nor one after a forwarded signal.
      if (first && !forwarded && WIFSIGNALED(status) && report_lost) {
        rank = report_lost(LostWorker{base.node_rank, w.local_rank, static_cast<int>(w.pid),
                                      Describe(status), WTERMSIG(status)});
      }
      Log(task, absl::StrCat("worker ",
                             rank.empty()
                                 ? absl::StrCat("(local rank ", w.local_rank, ", pid ", w.pid, ")")
                                 : rank,
                             " ", Describe(status), first ? "; stopping the other workers" : ""));
      if (result == kExitOk || result == kExitResumable) {
        result = code == kExitAborted || code == kExitUsage ? code : kExitFailed;
      }
    }
    if (absl::Now() > kill_at) {
      for (const Worker& w : workers) {
        if (w.running) kill(w.pid, SIGKILL);
      }
      kill_at = absl::InfiniteFuture();
    }
  }

  if (coordinator > 0) {
    // The coordinator lingers briefly after the job ends so operators can read the outcome.
    const absl::Time deadline = absl::Now() + absl::Seconds(result == kExitOk ? 15 : 3);
    int status = 0;
    while (waitpid(coordinator, &status, WNOHANG) == 0) {
      if (absl::Now() > deadline) {
        kill(coordinator, SIGTERM);
        waitpid(coordinator, &status, 0);
        break;
      }
      usleep(100 * 1000);
    }
  }
  if (result == kExitFailed && plan.start_coordinator) {
    Log(task, absl::StrCat("job failed; coordinator log: ", base.coordinator_log));
  }
  return result;
}

}  // namespace ddp
