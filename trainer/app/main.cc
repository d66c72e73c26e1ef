// ddp-trainer: what `srun` runs. Parses flags, then either launches this task's workers (and, on
// task 0, the job's coordinator) or, when re-executed by the launcher, is one worker.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "client/heartbeat_relay.h"
#include "common/dist_file.h"
#include "common/fd_limit.h"
#include "common/file_util.h"
#include "common/job_result.h"
#include "common/mutex_mode.h"
#include "common/slurm_env.h"
#include "trainer/app/worker.h"
#include "trainer/ddp/process_group_handle.h"
#include "trainer/launcher/config.h"
#include "trainer/launcher/launch_plan.h"
#include "trainer/launcher/launcher.h"

namespace {

// The folder of this executable: ddp-coordinator is installed beside ddp-trainer.
std::string ExecutableDir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  const std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

// The launcher's own connection to its job's coordinator, through the dist_file as it is now
// (no wait for it), every call bounded by a few seconds.
absl::StatusOr<std::unique_ptr<ddp::CoordinatorApi>> ConnectLauncher(
    const ddp::WorkerPlacement& base, absl::Duration rpc_timeout = absl::Seconds(3)) {
  ddp::ConnectOptions co;
  co.dist_file = base.dist_file;
  co.expected_job_id = base.job_id;
  co.min_generation = base.generation;
  co.dist_file_timeout = absl::ZeroDuration();
  co.rpc_timeout = rpc_timeout;
  return ddp::ConnectToCoordinator(co);
}

// Tells the coordinator about a worker that died without reporting (connecting on first use:
// only after every worker has been forked). Bounded: a few seconds at most, errors logged.
ddp::LostReporter LostReporter(const ddp::LaunchPlan& plan) {
  const ddp::WorkerPlacement base = plan.base;
  return [base, api = std::shared_ptr<ddp::CoordinatorApi>()](
             const ddp::LostWorker& lost) mutable -> ddp::LostDecision {
    if (api == nullptr) {
      auto connected = ConnectLauncher(base);
      if (!connected.ok()) {
        std::fprintf(stderr, "ddp-trainer: cannot report the lost worker to the coordinator: %s\n",
                     std::string(connected.status().message()).c_str());
        ddp::LostDecision none;
        // Worth asking again only while the path holds this job's dist_file: a coordinator that
        // restarts from its journal or is taken over keeps (then rewrites) it. No file, or
        // another job's or an earlier generation's, means this job's coordinator is not there
        // (not started yet, refused to start, or ended): the default decision stands.
        none.unanswered = !absl::IsNotFound(connected.status()) &&
                          !absl::IsFailedPrecondition(connected.status());
        return none;
      }
      api = std::move(*connected);
    }
    auto who = api->ReportLost(lost);
    if (!who.ok()) {
      std::fprintf(stderr, "ddp-trainer: coordinator did not take the lost worker report: %s\n",
                   std::string(who.status().message()).c_str());
      ddp::LostDecision none;
      none.unanswered = absl::IsUnavailable(who.status()) || absl::IsDeadlineExceeded(who.status());
      if (none.unanswered) api.reset();  // the next report reads the dist_file again
      return none;
    }
    return *who;
  };
}

// A spare node asks the coordinator whether it takes over a lost node (connecting again after
// any error: the dist_file may not exist yet, or name a restarted coordinator).
ddp::SpareStandBy StandByReporter(const ddp::LaunchPlan& plan) {
  const ddp::WorkerPlacement base = plan.base;
  ddp::SpareReport me;
  me.node_rank = base.node_rank;
  me.local_world_size = static_cast<int>(plan.local_ranks.size());
  me.host = ddp::HostName();
  me.pid = static_cast<int>(getpid());
  return [base, me, api = std::shared_ptr<ddp::CoordinatorApi>()]() mutable
         -> absl::StatusOr<ddp::SpareDecision> {
    if (api == nullptr) {
      auto connected = ConnectLauncher(base);
      // Not there yet, or gone: ask again later (only the coordinator's own refusal is final).
      if (!connected.ok()) return absl::UnavailableError(connected.status().message());
      api = std::move(*connected);
    }
    absl::StatusOr<ddp::SpareDecision> d = api->StandBy(me);
    if (!d.ok()) api.reset();
    return d;
  };
}

// A node's task asks which of its running workers the coordinator declared lost (fencing), over
// its own connection with a short deadline (the launcher's loop waits for it), connecting again
// after any error.
ddp::FenceQuery FenceReporter(const ddp::LaunchPlan& plan) {
  const ddp::WorkerPlacement base = plan.base;
  return [base, api = std::shared_ptr<ddp::CoordinatorApi>()](
             int node_rank, const std::vector<ddp::LiveWorker>& live) mutable
         -> absl::StatusOr<std::vector<ddp::FenceOrder>> {
    if (api == nullptr) {
      auto connected = ConnectLauncher(base, absl::Seconds(1));
      if (!connected.ok()) return absl::UnavailableError(connected.status().message());
      api = std::move(*connected);
    }
    absl::StatusOr<std::vector<ddp::FenceOrder>> orders = api->Fences(node_rank, live);
    if (!orders.ok()) api.reset();
    return orders;
  };
}

// The deadline of each of the standby probe's calls: its connect and its ping.
constexpr absl::Duration kStandbyProbeCallTimeout = absl::Milliseconds(500);

// A node task's standby probe (trainer/launcher/standby.h): the dist_file as it is now, and, on
// the node that is the standby of the coordinator it names, whether that coordinator answers
// within about half a second. The connection is kept between probes (it follows restarts and
// newer epochs by itself), opened again after an error, and closed while this node is not the
// standby.
ddp::CoordinatorProbe StandbyProbe(const ddp::LaunchPlan& plan) {
  const ddp::WorkerPlacement base = plan.base;
  return [base, api = std::shared_ptr<ddp::CoordinatorApi>()](int node_rank,
                                                              int num_nodes) mutable {
    ddp::CoordinatorSighting seen;
    seen.job_ended = ddp::ReadJobResultOf(base.dist_file, base.job_id, base.generation).has_value();
    const absl::StatusOr<ddp::DistFileContents> file =
        ddp::ReadDistFile(base.dist_file, {base.job_id, base.generation});
    if (!file.ok()) {
      seen.error = std::string(file.status().message());
      return seen;
    }
    seen.file = file->generation == base.generation;
    seen.epoch = file->epoch;
    seen.incarnation = file->incarnation;
    seen.coordinator_node = file->coordinator_node;
    if (ddp::StandbyWatch::StandbyOf(seen.coordinator_node, num_nodes) != node_rank) {
      api.reset();  // not this node's coordinator to watch (StandbyWatch::Observe: idle)
      return seen;
    }
    if (api == nullptr) {
      auto connected = ConnectLauncher(base, kStandbyProbeCallTimeout);
      if (!connected.ok()) {
        seen.error = std::string(connected.status().message());
        return seen;
      }
      api = std::move(*connected);
    }
    const absl::Status st = api->Ping();
    seen.answered = st.ok();
    if (!st.ok()) {
      seen.error = std::string(st.message());
      api.reset();
    }
    return seen;
  };
}

// A task of several workers relays their heartbeats, one call per node and interval (--heartbeats
// node); null when its workers heartbeat by themselves.
std::unique_ptr<ddp::HeartbeatRelay> StartHeartbeatRelay(const ddp::LaunchPlan& plan,
                                                         const ddp::TrainerConfig& config) {
  if (config.heartbeats != "node" || plan.local_ranks.size() < 2) return nullptr;
  ddp::HeartbeatRelayOptions o;
  o.connect.dist_file = plan.base.dist_file;
  o.connect.expected_job_id = plan.base.job_id;
  o.connect.min_generation = plan.base.generation;
  o.connect.rpc_timeout = ddp::WorkerRpcTimeout(config);
  o.node_rank = plan.base.node_rank;
  auto relay = ddp::HeartbeatRelay::Start(std::move(o));
  if (relay.ok()) return *std::move(relay);
  std::fprintf(stderr, "ddp-trainer: workers heartbeat by themselves: %s\n",
               std::string(relay.status().message()).c_str());
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  ddp::UseReleaseMutexMode();
  int exit_code = ddp::kExitOk;
  auto config = ddp::ParseTrainerFlags(argc, argv, &exit_code);
  if (!config.ok()) {
    if (!config.status().message().empty()) {
      std::fprintf(stderr, "ddp-trainer: %s (see --help)\n",
                   std::string(config.status().message()).c_str());
    }
    return exit_code;
  }
  const ddp::EnvMap env = ddp::ProcessEnvironment();
  // A Gloo worker holds a socket per peer and a launcher passes its limits on to its workers and
  // its coordinator: take the hard limit rather than the soft one Slurm passed on (often 1024;
  // common/fd_limit.h). The coordinator says in its log whether the job outgrows it.
  (void)ddp::RaiseFdLimitToHard();
  try {
    if (config->internal_worker) {
      // A reader of stdout that went away makes printing fail (EPIPE), never ends the worker.
      ::signal(SIGPIPE, SIG_IGN);
      auto placement = ddp::PlacementFromEnv(env);
      if (!placement.ok()) {
        std::fprintf(stderr, "ddp-trainer: %s\n",
                     std::string(placement.status().message()).c_str());
        return ddp::kExitUsage;
      }
      auto hold = ddp::TestHold::FromEnv(env);
      if (!hold.ok()) {
        std::fprintf(stderr, "ddp-trainer: %s\n", std::string(hold.status().message()).c_str());
        return ddp::kExitUsage;
      }
      const int code = ddp::RunWorker(*config, *placement, *hold);
      if (ddp::ProcessGroupHandle::GroupsEnding() > 0) {
        // A failed Gloo group is still being dropped on a thread of its own (a collective of it
        // waits for the group's timeout): leave without running static destructors under it.
        std::fflush(nullptr);
        std::_Exit(code);
      }
      return code;
    }
    auto plan = ddp::PlanLaunch(*config, env, ddp::CountVisibleGpus(env), getpid());
    if (!plan.ok()) {
      std::fprintf(stderr, "ddp-trainer: %s\n", std::string(plan.status().message()).c_str());
      return ddp::kExitUsage;
    }
    ddp::LauncherOptions options;
    options.timeouts.signal_stop_deadline = absl::Seconds(config->stop_timeout_s + 30);
    options.timeouts.coordinator_linger = absl::Seconds(config->linger_s);
    options.worker_command =
        ddp::WorkerCommand("/proc/self/exe", std::vector<std::string>(argv + 1, argv + argc));
    options.block_stop_request_until_ready = true;  // worker.cc InstallStopSignals unblocks
    options.coordinator_command = ddp::CoordinatorCommand(*plan, *config, options.timeouts,
                                                          ExecutableDir() + "/ddp-coordinator");
    options.coordinator_resume_command = options.coordinator_command;
    options.coordinator_resume_command.push_back("--resume-from-journal");
    options.coordinator_restarts = config->coordinator_restarts;
    options.report_lost = LostReporter(*plan);
    // A worker lost while the coordinator restarts or is taken over is reported again until it
    // answers (the workers themselves wait as long for it).
    options.lost_report_patience = absl::Seconds(config->coordinator_grace_s);
    options.max_restarts = config->max_restarts;
    options.warm_workers = config->warm_workers;
    // A hung worker is fenced (killed, then replaced) only when it can be replaced.
    if (config->max_restarts > 0) options.fences = FenceReporter(*plan);
    // The relay outlives the launcher's run: it owns the sockets its workers inherit.
    const std::unique_ptr<ddp::HeartbeatRelay> relay = StartHeartbeatRelay(*plan, *config);
    if (relay != nullptr) options.heartbeat_socket = [r = relay.get()] { return r->AddWorker(); };
    const bool standby = config->standby == "auto" && plan->base.num_nodes >= 2;
    if (standby && !(config->failover_timeout_s + 5 < config->coordinator_grace_s)) {
      std::fprintf(stderr,
                   "ddp-trainer: --failover-timeout %g must be at least 5 s under "
                   "--coordinator-grace %g (the workers must not give up while a takeover is "
                   "due), or use --standby off (see --help)\n",
                   config->failover_timeout_s, config->coordinator_grace_s);
      return ddp::kExitUsage;
    }
    if (standby) {
      options.probe_coordinator = StandbyProbe(*plan);
      options.standby_probe_bound = 2 * kStandbyProbeCallTimeout;  // a connect, then a ping
      options.takeover_command = options.coordinator_resume_command;
      options.failover_timeout = absl::Seconds(config->failover_timeout_s);
    }
    options.newer_epoch = [base = plan->base](int64_t mine) -> std::optional<int64_t> {
      const absl::StatusOr<ddp::DistFileContents> file =
          ddp::ReadDistFile(base.dist_file, {base.job_id, base.generation});
      if (file.ok() && file->epoch > mine) return file->epoch;
      return std::nullopt;
    };
    if (plan->spare) {
      options.stand_by = StandByReporter(*plan);
      options.stand_by_unanswered = absl::Seconds(config->coordinator_grace_s + 60);
    }
    return ddp::RunLauncher(*plan, options);
  } catch (const std::exception& e) {
    // The one boundary where exceptions (c10::Error, std::) become an exit code.
    std::string what = e.what();
    std::fprintf(stderr, "ddp-trainer: %s\n", what.substr(0, what.find('\n')).c_str());
    return ddp::kExitFailed;
  }
}
