// ddp-coordinator: the per-job control plane. Listens on an ephemeral port, publishes the
// dist_file, serves registration / store / heartbeats / status until the job ends, lingers a
// little so status can still be read, then exits 0 (SUCCEEDED), 3 (stopped for requeue) or 1.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/dist_file.h"
#include "common/mutex_mode.h"
#include "common/slurm_env.h"
#include "coordinator/clock.h"
#include "coordinator/http_endpoint.h"
#include "coordinator/job.h"
#include "coordinator/kv_store.h"
#include "coordinator/server.h"

namespace ddp {
namespace {

// How a finished job ended, for the log: a graceful stop keeps the state STOPPING (the status
// contract's word for it), but the job is over and resumable, and the log should say so.
std::string OutcomeName(JobState state) {
  return state == JobState::kStopping ? "STOPPED (resumable, state STOPPING)"
                                      : std::string(JobStateName(state));
}

struct Flags {
  int world_size = 0;
  std::string dist_file;
  std::string listen;
  std::string job_id;
  int64_t generation = -1;
  double registration_timeout_s = 300;
  double heartbeat_timeout_s = 10;
  int http_port = 0;
  double linger_s = 10;
  std::string log_file;
};

// Timestamped lines to stderr and, when configured, appended to a file.
class Logger {
 public:
  explicit Logger(const std::string& path) {
    if (!path.empty()) file_.open(path, std::ios::app);
  }
  bool ok(const std::string& path) const {
    absl::MutexLock lock(&mu_);
    return path.empty() || file_.is_open();
  }
  void Log(const std::string& line) {
    std::string out =
        absl::StrCat(absl::FormatTime("%Y-%m-%dT%H:%M:%E3S", absl::Now(), absl::LocalTimeZone()),
                     " ddp-coordinator: ", line, "\n");
    absl::MutexLock lock(&mu_);
    std::cerr << out << std::flush;
    if (file_.is_open()) file_ << out << std::flush;
  }

 private:
  mutable absl::Mutex mu_;
  std::ofstream file_ ABSL_GUARDED_BY(mu_);
};

int Run(const Flags& flags) {
  Logger logger(flags.log_file);
  if (!logger.ok(flags.log_file)) {
    std::cerr << "ddp-coordinator: cannot open --log-file " << flags.log_file << "\n";
    return 2;
  }
  auto log = [&logger](const std::string& line) { logger.Log(line); };

  const EnvMap env = ProcessEnvironment();
  std::string job_id = flags.job_id;
  int64_t generation = flags.generation;
  if (IsSlurm(env)) {
    std::string slurm_job =
        env.count("SLURM_JOB_ID") ? env.at("SLURM_JOB_ID") : env.at("SLURM_JOBID");
    if (job_id.empty()) job_id = slurm_job;
    if (generation < 0 && env.count("SLURM_RESTART_COUNT")) {
      generation = std::atoll(env.at("SLURM_RESTART_COUNT").c_str());
    }
  }
  if (job_id.empty()) job_id = LocalJobId();
  if (generation < 0) generation = 0;
  const std::string dist_file =
      flags.dist_file.empty() ? DefaultDistFilePath(job_id) : flags.dist_file;

  // Signals go to a dedicated thread (blocked here, before any other thread starts). Slurm
  // delivers a job step's signals to every process of the task, this one included: SIGUSR1
  // (time limit near, `scancel --signal=USR1`) must not kill the coordinator while the workers
  // checkpoint; it asks for the same graceful stop they are doing.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto contents = NewDistFileContents(job_id, generation, "", flags.http_port);
  if (!contents.ok()) {
    std::cerr << "ddp-coordinator: " << contents.status().message() << "\n";
    return 1;
  }
  JobConfig config;
  config.job_id = job_id;
  config.generation = generation;
  config.nonce = contents->nonce;
  config.world_size = flags.world_size;
  config.registration_timeout = absl::Seconds(flags.registration_timeout_s);
  config.heartbeat_timeout = absl::Seconds(flags.heartbeat_timeout_s);
  config.stall_threshold = absl::Seconds(2);  // the server ticks every 50 ms
  config.log = log;
  const Clock* clock = MonotonicClock::Get();
  Job job(config, clock);
  KvStore store;

  ServerOptions options;
  options.listen = flags.listen.empty() ? absl::StrCat(DefaultListenHost(), ":0") : flags.listen;
  options.token = contents->token;
  options.log = log;
  auto server = CoordinatorServer::Start(options, &job, &store, clock);
  if (!server.ok()) {
    std::cerr << "ddp-coordinator: " << server.status().message() << "\n";
    return 1;
  }
  // The HTTP endpoint listens on the gRPC host; the dist_file carries the port it really bound.
  std::unique_ptr<HttpEndpoint> http;
  if (flags.http_port >= 0) {
    HttpOptions http_options;
    http_options.host = options.listen.substr(0, options.listen.rfind(':'));
    if (http_options.host == "[::]" || http_options.host.empty()) http_options.host = "0.0.0.0";
    http_options.port = flags.http_port;
    http_options.token = contents->token;
    auto started = HttpEndpoint::Start(http_options, &(*server)->status_cache(),
                                       &(*server)->history(), &(*server)->metrics());
    if (!started.ok()) {
      std::cerr << "ddp-coordinator: " << started.status().message() << "\n";
      return 1;
    }
    http = *std::move(started);
    (*server)->SetHttpPort(http->port());
  }
  contents->http_port = http ? http->port() : 0;
  contents->grpc_address = (*server)->address();
  absl::Status published = PublishDistFile(dist_file, *contents);
  if (!published.ok()) {
    std::cerr << "ddp-coordinator: cannot publish dist_file: " << published.message() << "\n";
    return 1;
  }
  log(absl::StrCat("job ", job_id, " generation ", generation, ": waiting for ", flags.world_size,
                   " workers on ", (*server)->address(), "; dist_file ", dist_file));
  if (http) {
    const std::string host = (*server)->address().substr(0, (*server)->address().rfind(':'));
    log(absl::StrCat("dashboard: http://", host, ":", http->port(),
                     "/ (token in the dist_file; `ddpctl dashboard` prints the full URL)"));
  }

  absl::Notification end_linger;
  std::thread signal_thread([&] {
    int sig = 0;
    int count = 0;
    while (sigwait(&signals, &sig) == 0) {
      if (sig == 0) return;  // woken by pthread_kill(…, 0)? never delivered; kept for safety
      if (job.Finished()) {  // lingering: a signal now means "go"
        if (!end_linger.HasBeenNotified()) end_linger.Notify();
        continue;
      }
      const JobState state = job.Status().state;
      if (sig == SIGUSR1) {
        if (state != JobState::kRunning) continue;  // already stopping, or nothing to save
        log("signal SIGUSR1: checkpoint and stop");
        (void)job.Stop(true, "SIGUSR1");
        continue;
      }
      ++count;
      const bool graceful = count == 1 && state == JobState::kRunning;
      log(absl::StrCat("signal ", sig, ": ", graceful ? "checkpoint and stop" : "abort"));
      (void)job.Stop(graceful, absl::StrCat("signal ", sig));
    }
  });
  signal_thread.detach();

  while (!job.WaitFinished(absl::Seconds(1))) {
  }
  {
    const JobStatus s = job.Status();
    log(absl::StrCat("job finished: ", OutcomeName(s.state), s.failure_reason.empty() ? "" : ": ",
                     s.failure_reason, "; lingering ", flags.linger_s, "s (a signal ends it)"));
  }
  end_linger.WaitForNotificationWithTimeout(absl::Seconds(flags.linger_s));
  // Read again: a late report may have named the failure's root cause while we lingered.
  const JobStatus final_status = job.Status();
  if (http) http->Stop();
  (*server)->Shutdown(absl::Seconds(2));
  auto still_ours = ReadDistFile(dist_file, {job_id, generation});
  if (still_ours.ok() && still_ours->nonce == contents->nonce) ::unlink(dist_file.c_str());
  const int code = job.ExitCode();
  if (code != 0) {
    std::cerr << "ddp-coordinator: job " << OutcomeName(final_status.state) << ": "
              << final_status.failure_reason << "\n";
  }
  std::_Exit(code);  // the detached signal thread is still in sigwait
}

}  // namespace
}  // namespace ddp

int main(int argc, char** argv) {
  ddp::UseReleaseMutexMode();
  ddp::Flags flags;
  CLI::App app{"ddp-coordinator: the per-job control plane of slurm-ddp"};
  app.add_option("--world-size", flags.world_size, "Number of workers in the job")
      ->required()
      ->check(CLI::Range(1, ddp::kMaxWorldSize));
  app.add_option("--dist-file", flags.dist_file,
                 "Where to publish the dist_file "
                 "(default: dist_file.<job id> in the current folder)");
  app.add_option("--listen", flags.listen,
                 "host:port to listen on (default: this node's routable address, port 0 = any)");
  app.add_option("--job-id", flags.job_id, "Job id (default: SLURM_JOB_ID, else local-<pid>)");
  app.add_option("--generation", flags.generation,
                 "Generation (default: SLURM_RESTART_COUNT, else 0)");
  app.add_option("--registration-timeout", flags.registration_timeout_s,
                 "Seconds to wait for every worker to register")
      ->check(CLI::PositiveNumber);
  app.add_option("--heartbeat-timeout", flags.heartbeat_timeout_s,
                 "Seconds of heartbeat silence after which a rank is lost")
      ->check(CLI::PositiveNumber);
  app.add_option("--http-port", flags.http_port,
                 "HTTP port for the dashboard, /api/status and /metrics (0 = ephemeral, "
                 "-1 = no HTTP); the bound port is published in the dist_file")
      ->check(CLI::Range(-1, 65535));
  app.add_option("--linger", flags.linger_s, "Seconds to keep serving status after the job ends")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--log-file", flags.log_file, "Also append log lines to this file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::string what = e.what();
    for (char& c : what) {
      if (c == '\n') c = ' ';
    }
    std::cerr << "ddp-coordinator: " << what << " (see --help)\n";
    return 2;
  }
  return ddp::Run(flags);
}
