#include "coordinator/job/job.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/exit_codes.h"
#include "common/sampler_plan.h"
#include "coordinator/job/failure_causes.h"

namespace ddp {

Job::Job(JobConfig config, const Clock* clock) : Job(std::move(config), clock, clock->Now()) {}

Job::Job(JobConfig config, const Clock* clock, absl::Time start)
    : config_(std::move(config)),
      clock_(clock),
      membership_(config_.world_size, config_.nonce, config_.generation),
      liveness_(config_.heartbeat_timeout, config_.suspend_threshold, start),
      lifecycle_(start),
      shards_(config_.world_size),
      events_(start, config_.max_events, config_.log, config_.log_lines),
      recovery_(config_.max_restarts, config_.recovery_timeout, start),
      spares_(config_.heartbeat_timeout),
      stall_watch_(config_.stall, config_.world_size, start),
      straggler_watch_(config_.straggler,
                       HeartbeatInterval(config_.world_size, config_.heartbeat_timeout)),
      time_account_(start) {}

void Job::EventLocked(const std::string& line, Completions* out) {
  events_.Add(clock_->Now(), line, out);
  ChangedLocked();
}

void Job::ChangedLocked() { published_.Changed(); }

void Job::NoteRegistrationLocked(const WorkerIdentity& who, bool replacing, Completions* out) {
  const int registered = membership_.registered();
  const int world = config_.world_size;
  if (replacing || world <= kRegistrationsLoggedEach) {
    EventLocked(absl::StrCat(replacing ? "replacement registered: " : "registered ", who.host,
                             " pid ", who.pid, " node ", who.node_rank, " local rank ",
                             who.local_rank, " (", registered, " of ", world, ")"),
                out);
  } else if (registered * 10 / world != (registered - 1) * 10 / world) {
    // A large world: 16,384 lines tell little that the count does not, and they would push
    // everything else out of the bounded event list.
    EventLocked(absl::StrCat("registered ", registered, " of ", world, " workers"), out);
  } else {
    ChangedLocked();
  }
}

void Job::StateChangedLocked(const std::string& why, Completions* out) {
  lifecycle_.Stamp(clock_->Now());
  if (lifecycle_.finished()) time_account_.Stop(clock_->Now());
  published_.set_command(lifecycle_.command());
  EventLocked(absl::StrCat("job ", JobStateName(lifecycle_.state()), why.empty() ? "" : ": ", why),
              out);
}

bool Job::FinishedLocked() const { return lifecycle_.finished(); }

void Job::FailLocked(const FailureCause& cause, absl::StatusCode code, absl::Time revisable_until,
                     Completions* out, bool journaled) {
  if (!lifecycle_.Fail(cause, revisable_until)) return;
  if (journaled && config_.journal != nullptr) config_.journal->JobFailed(cause);
  StateChangedLocked(cause.text, out);
  membership_.FailWaiters(absl::Status(code, cause.text), out);
}

absl::Duration Job::HeartbeatInterval(int world_size, absl::Duration heartbeat_timeout) {
  const absl::Duration by_world = absl::Seconds(static_cast<double>(world_size) / 4096);
  return std::max(absl::Seconds(1), std::min(by_world, heartbeat_timeout / 4));
}

Job::RegisterCallback Job::WithHeartbeatInterval(RegisterCallback done) const {
  return [done = std::move(done),
          interval = HeartbeatInterval(config_.world_size, config_.heartbeat_timeout)](
             absl::StatusOr<RankAssignment> a) {
    if (a.ok()) a->heartbeat_interval = interval;
    done(std::move(a));
  };
}

void Job::Register(const WorkerIdentity& who, RegisterCallback done_as_is) {
  RegisterCallback done = WithHeartbeatInterval(std::move(done_as_is));
  Completions out;
  absl::Status error;
  {
    absl::MutexLock lock(&mu_);
    const absl::Status refusal =
        lifecycle_.state() == JobState::kFailed
            ? absl::AbortedError(absl::StrCat("job failed: ", lifecycle_.failure().text))
            : absl::OkStatus();
    absl::StatusOr<Membership::JoinResult> joined = membership_.Join(who, done, refusal, &out);
    if (!joined.ok()) {
      error = joined.status();
      if (absl::IsFailedPrecondition(error)) {
        events_.LogOnly(absl::StrCat("registration refused: ", error.message()), &out);
      }
      // A replacement whose predecessor's loss went to the coordinator before this restored one:
      // while the predecessor has not been heard from since the restore, retry (it is reported
      // again or misses its heartbeat timeout). Judged by its last heartbeat, not by the clock:
      // a Register that comes as the timeout runs out must not be refused a moment before the
      // loss is declared.
      if (absl::IsAlreadyExists(error) && restored_at_ != absl::InfinitePast() &&
          !HeardSinceRestoreLocked(membership_.RankOf(who.node_rank, who.local_rank))) {
        error = absl::UnavailableError(
            absl::StrCat(error.message(),
                         ", not heard from since the coordinator restarted from its journal; "
                         "retry until it is reported lost or its heartbeat timeout passes"));
      }
    } else if (joined->new_slot) {
      const bool replacing = membership_.world_complete();
      if (!replacing && config_.journal != nullptr) config_.journal->Registered(who);
      NoteRegistrationLocked(who, replacing, &out);
      if (joined->world_full) {
        if (replacing) {
          CompleteRecoveryLocked(&out);
        } else {
          CompleteRegistrationLocked(&out);
        }
      }
    }
  }
  if (!error.ok()) done(error);
}

void Job::CompleteRegistrationLocked(Completions* out) {
  const absl::Time now = clock_->Now();
  liveness_.Start(config_.world_size, now);  // before the rank table is published
  membership_.Complete(GenerationNote{}, out);
  AnnounceGenerationLocked();
  // The rank table goes to the log only (one line per rank), not into the bounded event list.
  events_.LogOnlyLines(membership_.RankTableLines(), out);
  lifecycle_.Start();
  if (config_.journal != nullptr) {
    config_.journal->GenerationFormed(*membership_.table(), recovery_.restarts());
  }
  StateChangedLocked(
      absl::StrCat("all ", config_.world_size, " workers registered on ", membership_.num_nodes(),
                   " node(s) after ", SecondsText(now - lifecycle_.start())),
      out);
}

bool Job::HeardSinceRestoreLocked(int rank) const {
  if (rank < 0 || rank >= liveness_.num_ranks()) return true;  // no such rank: a plain refusal
  const absl::Time now = clock_->Now();
  return now - liveness_.Sample(rank, now).since_seen > restored_at_;
}

absl::StatusOr<ShardAssignment> Job::GetShard(int rank, int pid, const ShardRequest& request) {
  absl::Status st = membership_.CheckWorker(rank, pid);
  if (!st.ok()) return st;
  Completions out;
  absl::MutexLock lock(&mu_);
  if (lifecycle_.state() == JobState::kFailed) {
    return absl::AbortedError(absl::StrCat("job failed: ", lifecycle_.failure().text));
  }
  // After an in-job recovery the ranks' own (synced) position is the truth: it may be past the
  // last checkpoint.
  const bool new_epoch = !shards_.Agreed(request.epoch);
  absl::StatusOr<ShardAssignment> a = shards_.Assign(
      rank, request,
      membership_.current() == 0 ? checkpoints_.ConsumedIn(request.epoch) : std::nullopt);
  if (a.ok()) {
    if (new_epoch && config_.journal != nullptr)
      config_.journal->EpochAgreed(request.epoch, request);
    if (new_epoch && a->consumed > 0 && a->consumed_world_size != a->world_size) {
      // The ledger of a re-split (a job that shrank): which positions of the epoch's order were
      // read by the old world, and how the rest is shared, each position once.
      const int64_t w0 = a->consumed_world_size;
      const int64_t total = GlobalSize(*a);
      const int64_t per_rank = NumSamplesPerRank(*a);
      const int64_t rest = total - a->consumed;
      EventLocked(absl::StrCat("epoch ", a->epoch, " re-split: positions [0, ", a->consumed,
                               ") of its order (", total, ", world ", w0, ") were read; the other ",
                               rest, " go to world ", a->world_size, ", ", per_rank, " per rank (",
                               per_rank * a->world_size - rest, " repeated to even them out)"),
                  &out);
    }
    published_.Touched();
  }
  return a;
}

absl::StatusOr<HeartbeatReply> Job::Heartbeat(int rank, int pid, const ProgressReport& progress) {
  absl::Status st = membership_.CheckWorker(rank, pid);
  if (!st.ok()) return st;
  HeartbeatReply reply;
  reply.command = published_.command();
  reply.membership_generation = published_.generation();
  if (progress.stop_signaled && reply.command == Command::kContinue) {
    StopSignaled(rank);
    reply.command = published_.command();
  }
  bool told_to_exit = false;  // this rank alone (a stall, with a restart left)
  if (reply.command != Command::kExit) {
    if (std::optional<std::string> why = published_.exit_orders().For(rank, pid)) {
      told_to_exit = true;
      reply.command = Command::kExit;
      reply.exit_code = kExitFailed;  // its launcher reports it lost and starts it again
      reply.reason = std::move(*why);
    }
  }
  liveness_.Beat(rank, progress, clock_->Now(),
                 reply.command == Command::kAbort || reply.command == Command::kExit);
  published_.Touched();
  if (reply.command != Command::kContinue && !told_to_exit) {
    absl::ReaderMutexLock lock(&mu_);
    if (reply.command == Command::kAbort) {
      reply.cause = lifecycle_.failure();
      reply.reason = reply.cause.text;
    } else if (reply.command == Command::kExit) {
      reply.cause = lifecycle_.failure();
      reply.exit_code = lifecycle_.exit_code();
      reply.reason = lifecycle_.exit_reason();
    } else {
      reply.reason = absl::StrCat("checkpoint and stop: ", lifecycle_.stop_reason());
    }
  }
  return reply;
}

absl::Status Job::CommitCheckpoint(int rank, int pid, const CommittedCheckpoint& checkpoint) {
  absl::Status st = membership_.CheckWorker(rank, pid);
  if (!st.ok()) return st;
  Completions out;
  absl::MutexLock lock(&mu_);
  st = checkpoints_.Commit(checkpoint);
  if (!st.ok()) return st;
  if (config_.journal != nullptr) config_.journal->CheckpointCommitted(checkpoint);
  EventLocked(absl::StrCat("checkpoint committed by rank ", rank, ": epoch ", checkpoint.epoch,
                           " step ", checkpoint.step, " ", checkpoint.path),
              &out);
  return absl::OkStatus();
}

void Job::RankFinishedLocked(Completions* out) {
  if (!lifecycle_.RankDone(membership_.num_ranks())) return;
  StateChangedLocked(lifecycle_.state() == JobState::kSucceeded
                         ? "every rank finished"
                         : "every rank checkpointed and stopped",
                     out);
}

absl::Status Job::ReportDone(int rank, int pid, const absl::Status& outcome) {
  absl::Status st = membership_.CheckWorker(rank, pid);
  if (!st.ok()) return st;
  Completions out;
  absl::MutexLock lock(&mu_);
  if (const WorkerIdentity w = membership_.who(rank);
      RetiredLocked(w.node_rank, w.local_rank, pid) != nullptr) {
    // A worker of a node handed to a spare, ending before its task fenced it: not the job's.
    events_.LogOnly(absl::StrCat("rank ", rank, " (pid ", pid, "), replaced, ends: ",
                                 outcome.ok() ? "done" : outcome.message(), "; ignored"),
                    &out);
    return absl::OkStatus();
  }
  const absl::Time now = clock_->Now();
  const bool stopped = absl::IsCancelled(outcome);
  const RankState final_state =
      outcome.ok() ? RankState::kDone : (stopped ? RankState::kStopped : RankState::kFailed);
  if (!liveness_.Finish(rank, final_state, /*reported=*/true, now)) return absl::OkStatus();
  if (final_state != RankState::kFailed && config_.journal != nullptr) {
    config_.journal->RankFinished(rank, pid, stopped);
  }
  const std::string who = membership_.Describe(rank);
  if (final_state == RankState::kFailed) {
    // Revisable: a death reported soon after is likely what broke this rank's collective.
    FailLocked(CauseOfWorkerOutcome(rank, who, outcome), absl::StatusCode::kAborted,
               now + kRootCauseWindow, &out);
  } else if (stopped) {
    EventLocked(
        absl::StrCat(who, " stopped", outcome.message().empty() ? "" : ": ", outcome.message()),
        &out);
    const JobState before = lifecycle_.state();
    if (before == JobState::kRunning && lifecycle_.RequestStop(absl::StrCat(who, " stopped"))) {
      if (config_.journal != nullptr) config_.journal->StopRequested(lifecycle_.stop_reason());
      StateChangedLocked(absl::StrCat("checkpoint and stop: ", lifecycle_.stop_reason()), &out);
    }
    RankFinishedLocked(&out);
  } else {
    EventLocked(absl::StrCat(who, " done"), &out);
    RankFinishedLocked(&out);
  }
  return absl::OkStatus();
}

absl::Status Job::Stop(bool graceful, const std::string& reason) {
  Completions out;
  absl::MutexLock lock(&mu_);
  if (FinishedLocked()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job already finished (", JobStateName(lifecycle_.state()), ")"));
  }
  const std::string why = reason.empty() ? "operator request" : reason;
  const JobState state = lifecycle_.state();
  if (graceful && state == JobState::kStopping) return absl::OkStatus();
  if (graceful && state != JobState::kRegistering && RequestGracefulStopLocked(why, &out)) {
    return absl::OkStatus();
  }
  FailLocked(CauseOfOperatorStop(why), absl::StatusCode::kAborted, absl::InfinitePast(), &out);
  return absl::OkStatus();
}

void Job::ShutDown(const std::string& reason) {
  Completions out;
  absl::MutexLock lock(&mu_);
  FailLocked(CauseOfOperatorStop(reason), absl::StatusCode::kAborted, absl::InfinitePast(), &out,
             /*journaled=*/false);
}

bool Job::RequestGracefulStopLocked(const std::string& why, Completions* out) {
  if (lifecycle_.state() == JobState::kRecovering) {
    // The state stays RECOVERING (no state change to announce); the stop is kept for when the
    // new generation has formed.
    if (!lifecycle_.stop_requested() && lifecycle_.RequestStop(why)) {
      if (config_.journal != nullptr) config_.journal->StopRequested(why);
      published_.set_command(lifecycle_.command());
      EventLocked(absl::StrCat("checkpoint and stop (after the recovery): ", why), out);
    }
    return true;
  }
  if (!lifecycle_.RequestStop(why)) return false;
  if (config_.journal != nullptr) config_.journal->StopRequested(why);
  StateChangedLocked(absl::StrCat("checkpoint and stop: ", why), out);
  return true;
}

void Job::SuspendedLocked(absl::Duration gap, Completions* out) {
  // Phase times, the stop's age and the registration's include the gap: none may count it.
  lifecycle_.Suspended(gap);
  stall_watch_.CountFrom(clock_->Now());
  EventLocked(absl::StrCat("coordinator was not running for ", SecondsText(gap),
                           " (job suspended or stopped, or host paused); that time does not count "
                           "against heartbeats"),
              out);
}

void Job::WatchJournalLocked(Completions* out) {
  if (config_.journal == nullptr || journal_noted_ == JournalCondition::kFailed) return;
  const JournalHealth h = config_.journal->Health();
  if (h.state == journal_noted_ || h.state == JournalCondition::kNone) return;
  journal_noted_ = h.state;
  switch (h.state) {
    case JournalCondition::kFailed:
      EventLocked(absl::StrCat("journal failed: ", h.error,
                               "; the coordinator can no longer be restarted from it"),
                  out);
      break;
    case JournalCondition::kStuck:
      EventLocked(absl::StrCat("journal stuck: a write or fdatasync has not returned for ",
                               SecondsText(absl::Seconds(h.stuck_seconds)), " (", h.pending,
                               " records waiting)"),
                  out);
      break;
    default:
      EventLocked("journal writes again", out);
      break;
  }
}

void Job::Tick() {
  Completions out;
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  WatchJournalLocked(&out);
  const std::optional<absl::Duration> gap = liveness_.ObserveTick(now);
  if (gap && !FinishedLocked()) SuspendedLocked(*gap, &out);
  const JobState state = lifecycle_.state();
  if (state == JobState::kRegistering) {
    if (lifecycle_.RegistrationAge(now) >= config_.registration_timeout) {
      FailLocked(
          CauseOfRegistrationTimeout(config_.registration_timeout, membership_.MissingWorkers()),
          absl::StatusCode::kDeadlineExceeded, absl::InfinitePast(), &out);
    }
  } else if (!FinishedLocked()) {
    while (std::optional<SilentRank> silent = liveness_.TakeSilent(now)) {
      LoseRankLocked(silent->rank,
                     CauseOfSilence(silent->rank, membership_.Describe(silent->rank),
                                    silent->silent, config_.heartbeat_timeout),
                     &out);
      if (FinishedLocked()) break;
    }
    TickRecoveryLocked(now, &out);
    if (!FinishedLocked() && recovery_.in_progress()) TakeOverLostNodesLocked(now, &out);
    // While a new membership generation forms, phases are stale: no rank is judged.
    if (!FinishedLocked() && lifecycle_.state() != JobState::kRecovering) {
      JudgeStallsLocked(now, &out);
    }
    WatchTimeLocked(now, &out);
    if (lifecycle_.StopOverdue(now, config_.stop_timeout)) {
      EndStopLocked(StallRule::Holdouts(RankViewsLocked(now, /*observe=*/false)),
                    absl::StrCat("graceful stop not completed within ",
                                 absl::FormatDuration(config_.stop_timeout)),
                    &out);
    }
  }
}

bool Job::Finished() const {
  absl::ReaderMutexLock lock(&mu_);
  return FinishedLocked();
}

std::string Job::SupersededStorePrefix() const {
  absl::ReaderMutexLock lock(&mu_);
  if (!membership_.forming_next()) return "";
  const std::shared_ptr<const RankTable> t = membership_.table();
  return t == nullptr ? "" : absl::StrCat(t->store_prefix, "/");
}

bool Job::WaitFinished(absl::Duration timeout) const {
  absl::ReaderMutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(this, &Job::FinishedLocked), timeout);
  return FinishedLocked();
}

int Job::ExitCode() const {
  absl::ReaderMutexLock lock(&mu_);
  return lifecycle_.ExitCode();
}

}  // namespace ddp
