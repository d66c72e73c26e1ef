#include "trainer/launcher/launcher.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/dist_file_lock.h"
#include "common/exit_codes.h"
#include "common/job_result.h"
#include "common/status_macros.h"
#include "trainer/launcher/coordinator_restarts.h"
#include "trainer/launcher/failure_policy.h"
#include "trainer/launcher/supervisor.h"
#include "trainer/launcher/warm_workers.h"

namespace ddp {
namespace {

void Log(const std::string& task, const std::string& line) {
  std::fprintf(stderr, "[ddp-trainer %s] %s\n", task.c_str(), line.c_str());
}

// One run of the launcher: the supervised children and what has been decided about them.
class LauncherRun {
 public:
  LauncherRun(const LaunchPlan& plan, const LauncherOptions& options)
      : plan_(plan),
        options_(options),
        task_(plan.base.local_mode ? "local"
                                   : absl::StrCat("node ", plan.base.node_rank,
                                                  plan.spare ? " task (spare)" : " task")),
        supervisor_({SIGTERM, SIGUSR1, SIGINT}),
        policy_(options.report_lost ? options.max_restarts : 0),
        coordinator_restarts_(
            options.coordinator_resume_command.empty() ? 0 : options.coordinator_restarts),
        warm_(supervisor_, options.timeouts.worker_stop_grace,
              {[this](int warm_fd) { return StartWorker(-1, -1, warm_fd); },
               [this] { return policy_.may_respawn(); },
               [this](const std::string& line) { Log(task_, line); }}) {}

  int Run() {
    if (plan_.start_coordinator) {
      if (const int code = StartCoordinator(); code != kExitOk) return code;
    }
    if (plan_.spare) {
      const std::optional<int> left = StandBy();
      if (left) return *left;
    }
    StartWorkers();
    if (options_.fences) next_fence_poll_ = absl::Now() + options_.fence_period;
    // A spare's node is the one it took over by now.
    standby_.emplace(plan_.base.node_rank, plan_.base.num_nodes, options_.failover_timeout);
    if (options_.probe_coordinator && !plan_.start_coordinator && plan_.base.num_nodes >= 2) {
      next_standby_poll_ = absl::Now() + options_.standby_first_answer_period;
    }
    // A worker whose report waits for an answer may still be started again.
    while (supervisor_.CountRunning(workers_) > 0 || !pending_lost_.empty()) {
      const absl::Time wake = std::min({stop_deadline_, next_fence_poll_, next_standby_poll_,
                                        next_lost_retry_, warm_.next_poll()});
      const absl::Time called = absl::Now();  // wake may have passed during the last round's calls
      const std::vector<SupervisorEvent> events = supervisor_.DoWork(wake);
      if (wake != absl::InfiniteFuture()) NoteIfNotRunning(std::max(wake, called), "waiting");
      for (const SupervisorEvent& e : events) OnEvent(e);
      if (absl::Now() >= warm_.next_poll()) warm_.Poll();
      if (absl::Now() >= next_lost_retry_) RetryLostReports();
      if (absl::Now() >= stop_deadline_) EndOverdueStop();
      if (absl::Now() >= next_standby_poll_) PollStandby();
      // Not while the coordinator is silent: each unanswered poll would hold this loop.
      if (absl::Now() >= next_fence_poll_) {
        if (coordinator_silent_) {
          next_fence_poll_ = absl::Now() + options_.fence_period;
        } else {
          PollFences();
        }
      }
    }
    warm_.Stop();
    if (coordinator_ >= 0) OutlastCoordinator();
    if (lock_ != nullptr) lock_->Release();  // the job is over: its dist_file path is free
    const int result = policy_.task_exit_code();
    if (result == kExitFailed && plan_.start_coordinator) {
      Log(task_, absl::StrCat("job failed; coordinator log: ", plan_.base.coordinator_log));
    }
    return result;
  }

 private:
  // The job's dist_file lock first (common/dist_file_lock.h): a path held by a live job is
  // refused (exit 2) before anything of that job's, its coordinator log included, is touched.
  // The coordinator inherits the lock, through every restart.
  int StartCoordinator() {
    const WorkerPlacement& base = plan_.base;
    absl::StatusOr<std::unique_ptr<DistFileLock>> lock = DistFileLock::Acquire(
        base.dist_file, absl::StrCat("job ", base.job_id, " generation ", base.generation,
                                     ", ddp-trainer task 0 pid ", ::getpid()));
    if (!lock.ok()) {
      Log(task_, std::string(lock.status().message()));
      return absl::IsAlreadyExists(lock.status()) ? kExitUsage : kExitFailed;
    }
    lock_ = std::move(*lock);
    // A result left at this path by an earlier run of the same job id and generation (a local
    // rerun) must not read as this run's end (JobEnded); the lock says no live job owns it.
    ::unlink(JobResultPath(base.dist_file).c_str());
    const std::vector<std::string> lock_flag = {"--dist-file-lock-fd", absl::StrCat(lock_->fd())};
    resume_command_ = options_.coordinator_resume_command;
    resume_command_.insert(resume_command_.end(), lock_flag.begin(), lock_flag.end());
    std::remove(base.coordinator_log.c_str());
    ChildSpec spec;
    spec.name = "coordinator";
    spec.spawn.argv = options_.coordinator_command;
    spec.spawn.argv.insert(spec.spawn.argv.end(), lock_flag.begin(), lock_flag.end());
    spec.spawn.inherit_fds = {lock_->fd()};
    spec.spawn.stop_grace = options_.timeouts.coordinator_stop_grace;
    spec.forward_signals = false;  // Slurm and terminals signal it directly
    auto id = supervisor_.Start(std::move(spec));
    if (!id.ok()) {
      Log(task_, absl::StrCat("cannot start ", id.status().message()));
      return kExitFailed;
    }
    coordinator_ = *id;
    Log(task_,
        absl::StrCat("started coordinator (pid ", supervisor_.pid(coordinator_), ", ",
                     base.world_size, " workers, ", plan_.mode, "); log: ", base.coordinator_log));
    return kExitOk;
  }

  // How the job ended, from its result file (common/job_result.h), when that file is this job's
  // and generation's; nullopt while there is none.
  std::optional<std::string> JobEnded() const {
    const std::optional<JobResult> r =
        ReadJobResultOf(plan_.base.dist_file, plan_.base.job_id, plan_.base.generation);
    if (!r) return std::nullopt;
    return absl::StrCat("job ", r->state, " (", JobResultPath(plan_.base.dist_file), ")");
  }

  // A spare node: no worker until the coordinator gives it a lost node. Returns the exit code
  // when it leaves instead; nullopt once it is that node (plan_.base.node_rank).
  std::optional<int> StandBy() {
    if (!options_.stand_by) {
      Log(task_, "spare node, but nothing to ask the coordinator with; leaving");
      return kExitFailed;
    }
    Log(task_, absl::StrCat("spare node: standing by to take over a lost node's ",
                            plan_.local_ranks.size(), " worker(s)"));
    absl::Time answered = absl::Now();
    while (true) {
      const absl::StatusOr<SpareDecision> d = options_.stand_by();
      const absl::Time now = absl::Now();
      if (d.ok()) {
        answered = now;
        if (d->action == SpareAction::kTakeOver) {
          Log(task_, absl::StrCat("taking over ", d->description, ": starting its workers as node ",
                                  d->node_rank));
          plan_.base.node_rank = d->node_rank;
          task_ = absl::StrCat("node ", d->node_rank, " task (spare)");
          return std::nullopt;
        }
        if (d->action == SpareAction::kLeave) {
          Log(task_, absl::StrCat(d->description, "; the spare was not needed"));
          return kExitOk;
        }
      } else if (d.status().code() == absl::StatusCode::kInvalidArgument) {
        Log(task_, absl::StrCat("the coordinator refuses this spare: ", d.status().message()));
        return kExitUsage;
      } else if (const std::optional<std::string> ended = JobEnded(); ended) {
        // The coordinator is gone because the job is over (it writes the result file last):
        // the step ends now, not after the unanswered wait.
        Log(task_, absl::StrCat(*ended, "; the spare was not needed"));
        return kExitOk;
      } else if (now - answered >= options_.stand_by_unanswered) {
        Log(task_, absl::StrCat("no answer from the coordinator for ",
                                absl::FormatDuration(options_.stand_by_unanswered), " (",
                                d.status().message(), "); the spare leaves"));
        return kExitOk;
      }
      if (const std::optional<int> sig =
              supervisor_.WaitForSignal(now + options_.stand_by_period)) {
        if (*sig == SIGUSR1) {
          // A stop to come (Slurm's warning before the time limit, a preemption): the job
          // checkpoints and stops, and its stop waits for a recovery under way, which may need
          // this spare. It leaves with the job (the result file) or when the coordinator says.
          Log(task_,
              "received SIGUSR1; the spare stands by until the job's stop ends (a recovery "
              "under way may still need it)");
          continue;
        }
        Log(task_, absl::StrCat("received ", strsignal(*sig), "; the spare leaves"));
        return kExitOk;
      }
    }
  }

  // A new relay socket for one worker, or -1 (it then heartbeats by itself).
  int NewRelaySocket(const std::string& who) {
    if (!options_.heartbeat_socket) return -1;
    absl::StatusOr<int> fd = options_.heartbeat_socket();
    if (fd.ok()) return *fd;
    Log(task_, absl::StrCat(who, " heartbeats by itself: ", fd.status().message()));
    return -1;
  }

  // Starts a worker for `local_rank` (relay socket `relay_fd`, or -1); a warm worker when
  // `warm_fd` >= 0 (its local rank comes with its activation).
  absl::StatusOr<int> StartWorker(int local_rank, int relay_fd, int warm_fd = -1) {
    WorkerPlacement p = plan_.base;
    p.local_rank = local_rank;
    p.heartbeat_fd = relay_fd;
    p.warm_fd = warm_fd;
    ChildSpec spec;
    spec.name = warm_fd >= 0 ? std::string("warm worker")
                             : absl::StrCat("worker (local rank ", local_rank, ")");
    spec.spawn.argv = options_.worker_command;
    if (options_.block_stop_request_until_ready) spec.blocked_at_start = {SIGUSR1};
    if (relay_fd >= 0) spec.spawn.inherit_fds.push_back(relay_fd);
    if (warm_fd >= 0) spec.spawn.inherit_fds.push_back(warm_fd);
    spec.spawn.extra_env = PlacementEnv(p);
    spec.spawn.stop_grace = options_.timeouts.worker_stop_grace;
    return supervisor_.Start(std::move(spec));
  }

  void StartWorkers() {
    for (int local_rank : plan_.local_ranks) {
      const int relay_fd = NewRelaySocket(absl::StrCat("worker (local rank ", local_rank, ")"));
      auto id = StartWorker(local_rank, relay_fd);
      if (!id.ok()) {
        Log(task_,
            absl::StrCat("cannot start ", id.status().message(), "; stopping the other workers"));
        policy_.OnLaunchFailure();
        StopWorkers();
        return;
      }
      workers_.push_back(*id);
      local_ranks_.push_back(local_rank);
      relay_fds_.push_back(relay_fd);
    }
    if (options_.warm_workers > 0 && policy_.may_respawn()) warm_.Start();
  }

  // Hands the slot of the lost worker `lost_id` to the task's warm worker, if one is ready
  // (warm_workers.h): it becomes that local rank's, with its relay socket.
  bool ActivateWarm(int lost_id, const std::string& who, const ExitStatus& status) {
    for (size_t slot = 0; slot < workers_.size(); ++slot) {
      if (workers_[slot] != lost_id) continue;
      const std::optional<int> id = warm_.Activate(local_ranks_[slot], relay_fds_[slot]);
      if (!id) return false;
      workers_[slot] = *id;
      Log(task_, absl::StrCat("worker ", who, " ", status.Describe(), "; the warm worker (pid ",
                              supervisor_.pid(*id), ") takes local rank ", local_ranks_[slot]));
      return true;
    }
    return false;
  }

  void StopWorkers() {
    warm_.Stop();
    for (int id : workers_) supervisor_.Stop(id, options_.timeouts.worker_stop_grace);
  }

  // The workers did not end within signal_stop_deadline of a forwarded stop signal: stop them,
  // naming them (the coordinator, which names ranks, did not end the stop).
  void EndOverdueStop() {
    stop_deadline_ = absl::InfiniteFuture();
    for (size_t i = 0; i < workers_.size(); ++i) {
      if (!supervisor_.running(workers_[i])) continue;
      Log(task_, absl::StrCat("worker (local rank ", local_ranks_[i], ", pid ",
                              supervisor_.pid(workers_[i]), ") still runs ",
                              absl::FormatDuration(options_.timeouts.signal_stop_deadline),
                              " after the stop signal; stopping it"));
      supervisor_.Stop(workers_[i], options_.timeouts.worker_stop_grace);
    }
  }

  // `expected`: when the wait or probe that just returned would have ended had this task run
  // all along. Much later means it did not run (the job suspended or stopped, the host paused):
  // the standby does not count that time as the coordinator's silence (standby.h).
  void NoteIfNotRunning(absl::Time expected, absl::string_view where) {
    const absl::Time now = absl::Now();
    const absl::Duration late = now - expected;
    if (!standby_ || late < options_.failover_timeout / 2) return;
    standby_->Resumed(now);
    if (next_standby_poll_ == absl::InfiniteFuture()) return;  // not a standby: nothing to say
    Log(task_,
        absl::StrCat("standby: this task was not running for about ",
                     absl::FormatDuration(absl::Trunc(late, absl::Milliseconds(100))), " (", where,
                     "; the job suspended or stopped, or the host paused); the "
                     "coordinator's silence counts from now"));
  }

  // The standby's probe (standby.h): takes the job over when the coordinator stayed silent.
  void PollStandby() {
    const absl::Time started = absl::Now();
    const CoordinatorSighting seen =
        options_.probe_coordinator(plan_.base.node_rank, plan_.base.num_nodes);
    NoteIfNotRunning(started + options_.standby_probe_bound, "probing the coordinator");
    const absl::Time now = absl::Now();
    next_standby_poll_ = now + options_.standby_period;
    const StandbyWatch::Verdict v = standby_->Observe(now, seen);
    if (standby_->AwaitingFirstAnswer()) {
      next_standby_poll_ = now + options_.standby_first_answer_period;
    }
    coordinator_silent_ = v == StandbyWatch::Verdict::kSilent;
    // Logged once the silence lasted half the timeout: a coordinator that ends the job shuts its
    // server down a moment before it removes the dist_file, which is no silence worth a line.
    if (v == StandbyWatch::Verdict::kSilent && !silence_logged_ &&
        standby_->silent_for(now) >= options_.failover_timeout / 2) {
      silence_logged_ = true;
      Log(task_, absl::StrCat("standby: coordinator epoch ", seen.epoch, " on node ",
                              seen.coordinator_node, " does not answer (", seen.error,
                              "); taking over after ",
                              absl::FormatDuration(options_.failover_timeout), " of silence"));
    }
    if (v == StandbyWatch::Verdict::kHealthy) silence_logged_ = false;
    if (v != StandbyWatch::Verdict::kTakeOver) return;
    // An epoch another standby claimed first is not claimed again: its coordinator serves (or,
    // lost in turn, the next epoch is this task's to claim).
    if (standby_->next_epoch() <= refused_epoch_) return;
    coordinator_silent_ = false;
    silence_logged_ = false;
    standby_->TookOver();
    TakeOver(now);
  }

  void TakeOver(absl::Time now) {
    const int64_t epoch = standby_->next_epoch();
    const int node = plan_.base.node_rank;
    if (coordinator_ >= 0 && supervisor_.running(coordinator_)) {
      Log(task_, "standby: this task's coordinator still runs; not taking over again");
      return;
    }
    std::vector<std::string> serve = options_.takeover_command;
    for (size_t i = 0; i + 1 < serve.size(); ++i) {
      if (serve[i] == "--log-file") serve[i + 1] = absl::StrCat(serve[i + 1], ".epoch", epoch);
    }
    serve.insert(serve.end(), {"--epoch", absl::StrCat(epoch), "--node-rank", absl::StrCat(node)});
    std::vector<std::string> claim = serve;
    const absl::Time last = standby_->last_answer();
    claim.insert(claim.end(),
                 {"--claim-epoch", "--lost-node", absl::StrCat(standby_->lost_node())});
    if (last != absl::InfinitePast()) {  // none when the coordinator never answered this task
      claim.insert(claim.end(),
                   {"--last-answer-unix",
                    absl::StrFormat("%.3f", absl::ToDoubleSeconds(last - absl::UnixEpoch()))});
    }
    resume_command_ = serve;
    ChildSpec spec;
    spec.name = absl::StrCat("coordinator (epoch ", epoch, ")");
    spec.spawn.argv = claim;
    spec.spawn.stop_grace = options_.timeouts.coordinator_stop_grace;
    spec.forward_signals = false;
    auto id = supervisor_.Start(std::move(spec));
    if (!id.ok()) {
      Log(task_, absl::StrCat("standby: cannot start a coordinator to take over: ",
                              id.status().message(), "; the workers end as without a coordinator"));
      return;
    }
    coordinator_ = *id;
    takeover_epoch_ = epoch;
    Log(task_,
        absl::StrCat(
            "standby: coordinator epoch ", epoch - 1, " on node ", standby_->lost_node(),
            " silent for ",
            absl::FormatDuration(absl::Trunc(standby_->silent_for(now), absl::Milliseconds(100))),
            "; taking the job over: started coordinator epoch ", epoch, " (pid ",
            supervisor_.pid(coordinator_), ", unix time ",
            absl::StrFormat("%.3f", absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch())), ")"));
  }

  // Asks the coordinator which running workers to fence, and kills those (with children).
  void PollFences() {
    std::vector<LiveWorker> live;
    for (size_t i = 0; i < workers_.size(); ++i) {
      if (supervisor_.running(workers_[i])) {
        live.push_back({local_ranks_[i], static_cast<int>(supervisor_.pid(workers_[i]))});
      }
    }
    const absl::StatusOr<std::vector<FenceOrder>> orders =
        options_.fences(plan_.base.node_rank, live);
    next_fence_poll_ = absl::Now() + (orders.ok() ? 1 : 2) * options_.fence_period;
    if (!orders.ok()) return;
    for (const FenceOrder& f : *orders) {
      for (size_t i = 0; i < workers_.size(); ++i) {
        const int id = workers_[i];
        if (local_ranks_[i] != f.local_rank || !supervisor_.running(id) ||
            supervisor_.pid(id) != f.pid) {
          continue;
        }
        Log(task_, absl::StrCat("fencing worker (local rank ", f.local_rank, ", pid ", f.pid,
                                "): ", f.reason, "; killing it and its children"));
        supervisor_.Kill(id);
      }
    }
  }

  // Starts the slot of the lost worker `id` again: the same child, or, for a slot a warm worker
  // held (its spec is a warm worker's), a new child for that local rank. Returns the slot's id.
  absl::StatusOr<int> RespawnSlot(int id) {
    if (!warm_.StartedWarm(id)) {
      RETURN_IF_ERROR(supervisor_.Respawn(id));
      return id;
    }
    for (size_t i = 0; i < workers_.size(); ++i) {
      if (workers_[i] != id) continue;
      ASSIGN_OR_RETURN(const int fresh, StartWorker(local_ranks_[i], relay_fds_[i]));
      workers_[i] = fresh;
      return fresh;
    }
    return absl::InternalError("no slot for the lost worker");
  }

  int LocalRankOf(int id) const {
    for (size_t i = 0; i < workers_.size(); ++i) {
      if (workers_[i] == id) return local_ranks_[i];
    }
    return -1;
  }

  void OnEvent(const SupervisorEvent& e) {
    switch (e.kind) {
      case SupervisorEvent::Kind::kSignal:
        Log(task_, absl::StrCat("received ", strsignal(e.signal), "; forwarding to workers"));
        policy_.OnSignalForwarded(e.signal);
        supervisor_.Forward(e.signal);
        if (stop_deadline_ == absl::InfiniteFuture()) {
          stop_deadline_ = absl::Now() + options_.timeouts.signal_stop_deadline;
        }
        return;
      case SupervisorEvent::Kind::kAbandoned:
        Log(task_, absl::StrCat(supervisor_.name(e.id), " (pid ", supervisor_.pid(e.id),
                                ") still runs after SIGKILL; giving up on it"));
        if (e.id != coordinator_) policy_.OnLaunchFailure();
        return;
      case SupervisorEvent::Kind::kExited:
        if (e.id == coordinator_) {
          OnCoordinatorExit(*e.status);
        } else if (warm_.IsReady(e.id)) {
          warm_.OnReadyExit(*e.status);
        } else if (LocalRankOf(e.id) < 0) {
          // A warm worker stopped after its activation failed, or at the end: not a slot's.
        } else {
          OnWorkerExit(e.id, *e.status);
        }
        return;
    }
  }

  // Exit 0: the job succeeded and the linger (--linger) ended while the workers were still on
  // their way out. Anything else: restart it from its journal while the policy allows.
  void OnCoordinatorExit(const ExitStatus& status) {
    if (!status.signaled() && status.code() == kExitOk) return;
    const pid_t pid = supervisor_.pid(coordinator_);
    if (takeover_epoch_ > 0 && supervisor_.starts(coordinator_) == 1 && !status.signaled() &&
        status.code() == kExitUsage) {
      // The claim failed (exit 2): another standby claimed the epoch. Nothing is restarted; the
      // workers follow whoever serves.
      refused_epoch_ = takeover_epoch_;
      Log(task_, absl::StrCat("standby: coordinator epoch ", takeover_epoch_, " (pid ", pid, ") ",
                              status.Describe(), "; not taking the job over (its log: ",
                              plan_.base.coordinator_log, ".epoch", takeover_epoch_, ")"));
      return;
    }
    if (const std::optional<int64_t> newer =
            options_.newer_epoch ? options_.newer_epoch(own_epoch()) : std::nullopt) {
      Log(task_,
          absl::StrCat("coordinator (pid ", pid, ") ", status.Describe(),
                       "; not restarted: coordinator epoch ", *newer, " serves the job now"));
      return;
    }
    if (const std::optional<std::string> ended = JobEnded(); ended) {
      // It wrote the job's outcome before it exited: a restart would find no job to resume.
      Log(task_, absl::StrCat("coordinator (pid ", pid, ") ", status.Describe(), " after the ",
                              *ended, "; not restarted"));
      return;
    }
    const CoordinatorRestarts::Decision d = coordinator_restarts_.OnExit(status);
    if (!d.restart) {
      Log(task_, absl::StrCat("coordinator (pid ", pid, ") ", status.Describe(),
                              " while workers still run; ", d.why));
      return;
    }
    absl::Status st = supervisor_.Respawn(coordinator_, resume_command_);
    Log(task_, absl::StrCat("coordinator (pid ", pid, ") ", status.Describe(), "; ",
                            st.ok() ? absl::StrCat(d.why, ": pid ", supervisor_.pid(coordinator_))
                                    : absl::StrCat("cannot restart it: ", st.message())));
  }

  // A lost worker whose report the coordinator has not answered yet.
  struct PendingLost {
    int id;
    ExitStatus status;
    FailurePolicy::Decision decision;
    LostWorker lost;
    absl::Time give_up;
  };

  void OnWorkerExit(int id, const ExitStatus& status) {
    const bool replacement = supervisor_.starts(id) > 1 || warm_.StartedWarm(id);
    const FailurePolicy::Decision d = policy_.OnWorkerExit(status, replacement);
    if (!d.failure) return;
    const int local_rank = LocalRankOf(id);
    const pid_t pid = supervisor_.pid(id);
    LostDecision decision;  // kStop when nobody was asked
    // Once the job has ended (its result file is written) there is nobody left to ask.
    if (d.report_lost && options_.report_lost && !JobEnded()) {
      const LostWorker lost{plan_.base.node_rank,  local_rank,
                            static_cast<int>(pid), status.Describe(),
                            status.signal(),       status.signaled() ? 0 : status.code()};
      decision = options_.report_lost(lost);
      if (decision.unanswered && JobEnded()) {
        decision = LostDecision{};  // it ended meanwhile
      } else if (decision.unanswered && options_.lost_report_patience > absl::ZeroDuration()) {
        Log(task_,
            absl::StrCat("worker (local rank ", local_rank, ", pid ", pid, ") ", status.Describe(),
                         "; the coordinator does not answer: reporting it again until it "
                         "does (at most ",
                         absl::FormatDuration(options_.lost_report_patience), ")"));
        pending_lost_.push_back({id, status, d, lost, absl::Now() + options_.lost_report_patience});
        next_lost_retry_ = std::min(next_lost_retry_, absl::Now() + absl::Seconds(1));
        return;
      }
    }
    ActOnLost(id, status, d, decision);
  }

  // Reports again the lost workers the coordinator did not answer; acts on each answer, and
  // without one once its patience is over.
  void RetryLostReports() {
    std::vector<PendingLost> still;
    for (PendingLost& p : pending_lost_) {
      // The coordinator that did not answer may be gone because the job ended (it writes the
      // result file last): then there is nobody to ask or wait for.
      LostDecision decision;
      if (!JobEnded()) decision = options_.report_lost(p.lost);
      if (decision.unanswered && absl::Now() < p.give_up) {
        still.push_back(std::move(p));
        continue;
      }
      ActOnLost(p.id, p.status, p.decision, decision);
    }
    pending_lost_ = std::move(still);
    next_lost_retry_ =
        pending_lost_.empty() ? absl::InfiniteFuture() : absl::Now() + absl::Seconds(1);
  }

  void ActOnLost(int id, const ExitStatus& status, const FailurePolicy::Decision& d,
                 const LostDecision& decision) {
    const int local_rank = LocalRankOf(id);
    const pid_t pid = supervisor_.pid(id);
    const std::string& rank = decision.description;
    const std::string who =
        rank.empty() ? absl::StrCat("(local rank ", local_rank, ", pid ", pid, ")") : rank;
    if (decision.action == LostAction::kLeave) {
      policy_.OnLeave();
      Log(task_,
          absl::StrCat(
              "worker ", who, " ", status.Describe(), "; the coordinator retired this node (",
              decision.retired.empty() ? "its ranks went to another node" : decision.retired,
              "): stopping the other workers and leaving"));
      StopWorkers();
      return;
    }
    FailurePolicy::Action action = d.action;
    if (d.ask &&
        !(action == FailurePolicy::Action::kRespawn && decision.action == LostAction::kRespawn)) {
      const bool stop = decision.action != LostAction::kWait;
      // A STOP with a description is the coordinator's: the job failed (restarts exhausted).
      policy_.OnRespawnDeclined(status, stop, stop && !decision.description.empty());
      if (!stop) {
        Log(task_, absl::StrCat("worker ", who, " ", status.Describe(),
                                "; not started again (the coordinator decides at its deadline)"));
        return;
      }
      action = FailurePolicy::Action::kStopOthers;
    }
    switch (action) {
      case FailurePolicy::Action::kNone:
        Log(task_, absl::StrCat("worker ", who, " ", status.Describe()));
        return;
      case FailurePolicy::Action::kStopOthers:
        Log(task_,
            absl::StrCat("worker ", who, " ", status.Describe(), "; stopping the other workers"));
        StopWorkers();
        return;
      case FailurePolicy::Action::kRespawn: {
        if (ActivateWarm(id, who, status)) return;
        absl::StatusOr<int> respawned = RespawnSlot(id);
        Log(task_,
            absl::StrCat(
                "worker ", who, " ", status.Describe(), "; ",
                respawned.ok()
                    ? absl::StrCat("started it again (pid ", supervisor_.pid(*respawned), ")")
                    : absl::StrCat("cannot start it again: ", respawned.status().message(),
                                   "; stopping the other workers")));
        if (!respawned.ok()) {
          policy_.OnLaunchFailure();
          StopWorkers();
        }
        return;
      }
    }
  }

  // Every worker has ended; the coordinator may linger so operators can read the outcome.
  void OutlastCoordinator() {
    const SupervisionTimeouts& t = options_.timeouts;
    const bool succeeded = policy_.task_exit_code() == kExitOk;
    const absl::Time stop_at =
        absl::Now() +
        (succeeded ? t.coordinator_linger + t.coordinator_exit_margin : t.coordinator_failed_wait);
    bool stop_sent = false;
    while (supervisor_.running(coordinator_)) {
      for (const SupervisorEvent& e :
           supervisor_.DoWork(stop_sent ? absl::InfiniteFuture() : stop_at)) {
        if (e.kind == SupervisorEvent::Kind::kSignal && !stop_sent) {
          Log(task_, absl::StrCat("received ", strsignal(e.signal), "; stopping the coordinator"));
          supervisor_.Stop(coordinator_, t.coordinator_stop_grace);
          stop_sent = true;
        } else if (e.kind == SupervisorEvent::Kind::kAbandoned) {
          Log(task_, absl::StrCat("coordinator (pid ", supervisor_.pid(e.id),
                                  ") still runs after SIGKILL; giving up on it"));
        }
      }
      if (!stop_sent && absl::Now() >= stop_at && supervisor_.running(coordinator_)) {
        supervisor_.Stop(coordinator_, t.coordinator_stop_grace);
        stop_sent = true;
      }
    }
  }

  LaunchPlan plan_;  // a spare's becomes the lost node's
  const LauncherOptions& options_;
  std::string task_;
  Supervisor supervisor_;
  FailurePolicy policy_;
  int coordinator_ = -1;
  std::vector<int> relay_fds_;               // per slot, as workers_: its relay socket, or -1
  std::unique_ptr<DistFileLock> lock_;       // task 0: the job's dist_file, held to the end
  std::vector<std::string> resume_command_;  // the coordinator's restart, with the lock
  CoordinatorRestarts coordinator_restarts_;
  WarmWorkers warm_;                                     // --warm-workers
  absl::Time stop_deadline_ = absl::InfiniteFuture();    // set by a forwarded stop signal
  absl::Time next_fence_poll_ = absl::InfiniteFuture();  // with options_.fences
  std::vector<PendingLost> pending_lost_;                // reports the coordinator has not answered
  absl::Time next_lost_retry_ = absl::InfiniteFuture();
  std::optional<StandbyWatch> standby_;                    // set once this task's node is known
  absl::Time next_standby_poll_ = absl::InfiniteFuture();  // with options_.probe_coordinator
  bool coordinator_silent_ = false;                        // the standby's last probe
  bool silence_logged_ = false;
  int64_t takeover_epoch_ = 0;
  int64_t refused_epoch_ = -1;  // an epoch this task's claim lost (exit 2)  // the epoch of the
                                // coordinator this task started as standby
  int64_t own_epoch() const { return takeover_epoch_; }
  std::vector<int> workers_;      // supervisor ids ...
  std::vector<int> local_ranks_;  // ... and their local ranks
};

}  // namespace

int RunLauncher(const LaunchPlan& plan, const LauncherOptions& options) {
  // A reader of the output that goes away (`ddp-trainer ... | head -n 3`) must not end the job: a
  // write to the closed pipe then fails with EPIPE (the line is dropped) instead of killing the
  // launcher. The workers and the coordinator inherit the setting through exec, and set it too.
  ::signal(SIGPIPE, SIG_IGN);
  return LauncherRun(plan, options).Run();
}

}  // namespace ddp
