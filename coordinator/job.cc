#include "coordinator/job.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/sampler_plan.h"
#include "coordinator/validation.h"

namespace ddp {
namespace {

const char* PhaseName(WorkerPhase p) {
  switch (p) {
    case WorkerPhase::kStarting:
      return "starting";
    case WorkerPhase::kTraining:
      return "training";
    case WorkerPhase::kEvaluating:
      return "evaluating";
    case WorkerPhase::kCheckpointing:
      return "checkpointing";
    case WorkerPhase::kFinished:
      return "finished";
  }
  return "unknown";
}

}  // namespace

Job::Job(JobConfig config, const Clock* clock)
    : config_(std::move(config)), clock_(clock), start_(clock->Now()), last_tick_(start_) {}

std::string Job::SecondsText(absl::Duration d) {
  return absl::StrCat(absl::ToDoubleSeconds(d), "s");
}

void Job::Run(std::vector<Completion>& completions) {
  for (Completion& c : completions) c();
}

void Job::EventLocked(const std::string& line, std::vector<Completion>* out) {
  events_.push_back(
      absl::StrFormat("+%.1fs %s", absl::ToDoubleSeconds(clock_->Now() - start_), line));
  while (events_.size() > config_.max_events) events_.pop_front();
  version_.fetch_add(1, std::memory_order_acq_rel);
  major_version_.fetch_add(1, std::memory_order_acq_rel);
  if (config_.log) out->push_back([log = config_.log, line] { log(line); });
}

void Job::SetStateLocked(JobState state, const std::string& why, std::vector<Completion>* out) {
  if (state_ == state) return;
  state_ = state;
  command_.store(state == JobState::kFailed     ? Command::kAbort
                 : state == JobState::kStopping ? Command::kCheckpointAndStop
                                                : Command::kContinue,
                 std::memory_order_release);
  EventLocked(absl::StrCat("job ", JobStateName(state), why.empty() ? "" : ": ", why), out);
}

bool Job::FinishedLocked() const { return IsTerminal(state_, stopped_); }

std::string Job::DescribeRank(int rank) const {
  const WorkerIdentity& w = ranks_[static_cast<size_t>(rank)].who;
  return absl::StrCat("rank ", rank, " (host ", w.host, ", node ", w.node_rank, ", local rank ",
                      w.local_rank, ", pid ", w.pid, ")");
}

void Job::FailLocked(int rank, const std::string& reason, absl::StatusCode code,
                     std::vector<Completion>* out) {
  if (FinishedLocked()) return;
  failed_rank_ = rank;
  failure_reason_ = reason;
  SetStateLocked(JobState::kFailed, reason, out);
  for (auto& [key, slot] : slots_) {
    for (RegisterCallback& cb : slot.waiting) {
      out->push_back([cb = std::move(cb), code, reason] { cb(absl::Status(code, reason)); });
    }
    slot.waiting.clear();
  }
}

absl::StatusOr<Job::RankSlot*> Job::CheckWorker(int rank, int pid) const {
  if (!world_complete_.load(std::memory_order_acquire)) {
    return absl::FailedPreconditionError("the world is not complete yet: register first");
  }
  if (rank < 0 || rank >= num_ranks_) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " is outside 0..", num_ranks_ - 1));
  }
  RankSlot* slot = &ranks_[static_cast<size_t>(rank)];
  if (slot->who.pid != pid) {
    return absl::PermissionDeniedError(
        absl::StrCat("rank ", rank, " is registered to pid ", slot->who.pid, ", not ", pid));
  }
  return slot;
}

absl::StatusOr<ShardAssignment> Job::GetShard(int rank, int pid, const ShardRequest& request) {
  absl::Status st = ValidateShardRequest(request);
  if (!st.ok()) return st;
  ShardAssignment a;
  {
    absl::StatusOr<RankSlot*> slot = CheckWorker(rank, pid);
    if (!slot.ok()) return slot.status();
    absl::MutexLock lock(&mu_);
    if (state_ == JobState::kFailed) {
      return absl::AbortedError(absl::StrCat("job failed: ", failure_reason_));
    }
    absl::MutexLock slot_lock(&(*slot)->mu);
    if (request.epoch < (*slot)->last_epoch) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " asked for epoch ",
                                                     request.epoch, " after epoch ",
                                                     (*slot)->last_epoch, " (epochs go forward)"));
    }
    auto [it, inserted] = epoch_params_.emplace(request.epoch, request);
    const ShardRequest& agreed = it->second;
    if (!inserted && (agreed.dataset_size != request.dataset_size || agreed.seed != request.seed ||
                      agreed.shuffle != request.shuffle || agreed.drop_last != request.drop_last ||
                      agreed.resume_consumed != request.resume_consumed ||
                      agreed.resume_world_size != request.resume_world_size)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", rank, " disagrees with the other ranks on epoch ", request.epoch,
          " (dataset_size ", request.dataset_size, " vs ", agreed.dataset_size, ", seed ",
          request.seed, " vs ", agreed.seed, ", shuffle/drop_last/resume must match)"));
    }
    (*slot)->last_epoch = request.epoch;
    a.epoch = request.epoch;
    a.dataset_size = request.dataset_size;
    a.seed = request.seed;
    a.shuffle = request.shuffle;
    a.drop_last = request.drop_last;
    a.world_size = config_.world_size;
    a.rank = rank;
    a.consumed_world_size = config_.world_size;
    if (has_checkpoint_ && checkpoint_.epoch == request.epoch) {
      a.consumed = checkpoint_.consumed;
    } else if (request.resume_consumed > 0) {
      a.consumed = request.resume_consumed;
      a.consumed_world_size = request.resume_world_size;
    }
    version_.fetch_add(1, std::memory_order_acq_rel);
  }
  absl::Status valid = ValidateShardAssignment(a);
  if (!valid.ok()) return absl::InvalidArgumentError(valid.message());
  return a;
}

absl::StatusOr<HeartbeatReply> Job::Heartbeat(int rank, int pid, const ProgressReport& progress) {
  absl::Status st = ValidateProgress(progress);
  if (!st.ok()) return st;
  absl::StatusOr<RankSlot*> slot = CheckWorker(rank, pid);
  if (!slot.ok()) return slot.status();
  const absl::Time now = clock_->Now();
  HeartbeatReply reply;
  {
    absl::MutexLock slot_lock(&(*slot)->mu);
    (*slot)->last_seen = now;
    (*slot)->progress = progress;
    reply.command = command_.load(std::memory_order_acquire);
    if (!(*slot)->sticky && reply.command != Command::kAbort) {
      (*slot)->state = PhaseName(progress.phase);
    }
  }
  version_.fetch_add(1, std::memory_order_acq_rel);
  if (reply.command != Command::kContinue) {
    absl::ReaderMutexLock lock(&mu_);
    reply.reason = failure_reason_;
  }
  return reply;
}

absl::Status Job::CommitCheckpoint(int rank, int pid, const CommittedCheckpoint& checkpoint) {
  absl::Status st = ValidateCheckpoint(checkpoint);
  if (!st.ok()) return st;
  std::vector<Completion> out;
  {
    absl::StatusOr<RankSlot*> slot = CheckWorker(rank, pid);
    if (!slot.ok()) return slot.status();
    absl::MutexLock lock(&mu_);
    if (has_checkpoint_ &&
        (checkpoint.epoch < checkpoint_.epoch ||
         (checkpoint.epoch == checkpoint_.epoch && checkpoint.step < checkpoint_.step))) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint at epoch ", checkpoint.epoch, " step ", checkpoint.step,
                       " is older than the committed one (epoch ", checkpoint_.epoch, " step ",
                       checkpoint_.step, ")"));
    }
    has_checkpoint_ = true;
    checkpoint_ = checkpoint;
    EventLocked(absl::StrCat("checkpoint committed by rank ", rank, ": epoch ", checkpoint.epoch,
                             " step ", checkpoint.step, " ", checkpoint.path),
                &out);
  }
  Run(out);
  return absl::OkStatus();
}

void Job::RankFinishedLocked(std::vector<Completion>* out) {
  ++ranks_done_;
  if (ranks_done_ < num_ranks_) return;
  if (state_ == JobState::kRunning) {
    SetStateLocked(JobState::kSucceeded, "every rank finished", out);
  } else if (state_ == JobState::kStopping) {
    stopped_ = true;
    EventLocked("job stopped: every rank checkpointed and stopped", out);
  }
}

absl::Status Job::ReportDone(int rank, int pid, const absl::Status& outcome) {
  absl::StatusOr<RankSlot*> slot = CheckWorker(rank, pid);
  if (!slot.ok()) return slot.status();
  std::vector<Completion> out;
  {
    absl::MutexLock lock(&mu_);
    const char* state = "done";
    {
      absl::MutexLock slot_lock(&(*slot)->mu);
      if ((*slot)->done) return absl::OkStatus();  // a retry
      (*slot)->done = true;
      (*slot)->sticky = true;
      (*slot)->last_seen = clock_->Now();
      if (absl::IsCancelled(outcome)) {
        state = "stopped";
      } else if (!outcome.ok()) {
        state = "failed";
      }
      (*slot)->state = state;
    }
    const std::string who = DescribeRank(rank);
    const std::string message = ClampReason(std::string(outcome.message()));
    if (!outcome.ok() && !absl::IsCancelled(outcome)) {
      const bool was_finished = FinishedLocked();
      FailLocked(rank, absl::StrCat(who, " failed: ", message), absl::StatusCode::kAborted, &out);
      if (!was_finished) failure_revisable_until_ = clock_->Now() + kRootCauseWindow;
    } else if (absl::IsCancelled(outcome)) {
      EventLocked(absl::StrCat(who, " stopped", message.empty() ? "" : ": ", message), &out);
      if (state_ == JobState::kRunning) {
        stop_graceful_ = true;
        failure_reason_ = absl::StrCat("checkpoint and stop: ", who, " stopped");
        SetStateLocked(JobState::kStopping, failure_reason_, &out);
      }
      RankFinishedLocked(&out);
    } else {
      EventLocked(absl::StrCat(who, " done"), &out);
      RankFinishedLocked(&out);
    }
  }
  Run(out);
  return absl::OkStatus();
}

absl::StatusOr<std::string> Job::ReportLost(int node_rank, int local_rank, int pid,
                                            const std::string& what) {
  std::vector<Completion> out;
  std::string who;
  {
    absl::MutexLock lock(&mu_);
    auto it = slots_.find({node_rank, local_rank});
    if (it == slots_.end() || it->second.who.pid != pid) {
      return absl::NotFoundError(absl::StrCat("no registered worker at node ", node_rank,
                                              " local rank ", local_rank, " with pid ", pid));
    }
    const std::string how = ClampReason(what);
    if (!world_complete_.load(std::memory_order_acquire)) {
      who = absl::StrCat("worker (host ", it->second.who.host, ", node ", node_rank,
                         ", local rank ", local_rank, ", pid ", pid, ")");
      FailLocked(-1, absl::StrCat(who, " ", how, " during registration"),
                 absl::StatusCode::kAborted, &out);
    } else {
      int rank = 0;
      while (rank < num_ranks_ &&
             (ranks_[static_cast<size_t>(rank)].who.node_rank != node_rank ||
              ranks_[static_cast<size_t>(rank)].who.local_rank != local_rank)) {
        ++rank;
      }
      if (rank == num_ranks_) return absl::InternalError("registered worker has no rank");
      RankSlot& slot = ranks_[static_cast<size_t>(rank)];
      {
        absl::MutexLock slot_lock(&slot.mu);
        slot.state = "lost";
        slot.sticky = true;
      }
      who = DescribeRank(rank);
      const std::string cause = absl::StrCat(who, " ", how);
      if (!FinishedLocked()) {
        FailLocked(rank, cause, absl::StatusCode::kAborted, &out);
      } else if (state_ == JobState::kFailed && failed_rank_ != rank &&
                 clock_->Now() <= failure_revisable_until_) {
        // The earlier report (typically a peer's "connection reset" in a collective) followed
        // from this death: name the dead rank as the cause.
        EventLocked(absl::StrCat("root cause: ", cause, " (", DescribeRank(failed_rank_),
                                 " failed after it)"),
                    &out);
        failed_rank_ = rank;
        failure_reason_ = absl::StrCat(cause, "; then ", failure_reason_);
        failure_revisable_until_ = absl::InfinitePast();
      } else {
        EventLocked(cause, &out);
      }
    }
  }
  Run(out);
  return who;
}

absl::Status Job::Stop(bool graceful, const std::string& reason) {
  std::vector<Completion> out;
  {
    absl::MutexLock lock(&mu_);
    if (FinishedLocked()) {
      return absl::FailedPreconditionError(
          absl::StrCat("job already finished (", JobStateName(state_), ")"));
    }
    const std::string why = ClampReason(reason.empty() ? "operator request" : reason);
    if (graceful && state_ == JobState::kRunning) {
      stop_graceful_ = true;
      failure_reason_ = absl::StrCat("checkpoint and stop: ", why);
      SetStateLocked(JobState::kStopping, failure_reason_, &out);
    } else if (!graceful || state_ == JobState::kRegistering) {
      FailLocked(-1, absl::StrCat("stopped by operator: ", why), absl::StatusCode::kAborted, &out);
    }
  }
  Run(out);
  return absl::OkStatus();
}

void Job::Tick() {
  std::vector<Completion> out;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    const absl::Duration gap = now - last_tick_;
    last_tick_ = now;
    if (gap > config_.stall_threshold && !FinishedLocked()) ForgiveStallLocked(gap, now, &out);
    if (state_ == JobState::kRegistering &&
        now - start_ - registration_stalled_ >= config_.registration_timeout) {
      FailLocked(-1,
                 absl::StrCat("registration timed out after ",
                              absl::FormatDuration(config_.registration_timeout), ": ",
                              MissingWorkersLocked()),
                 absl::StatusCode::kDeadlineExceeded, &out);
    } else if ((state_ == JobState::kRunning || state_ == JobState::kStopping) && !stopped_) {
      for (int r = 0; r < num_ranks_; ++r) {
        RankSlot& slot = ranks_[static_cast<size_t>(r)];
        absl::Duration silent;
        {
          absl::MutexLock slot_lock(&slot.mu);
          if (slot.sticky || now - slot.last_seen <= config_.heartbeat_timeout) continue;
          silent = now - slot.last_seen;
          slot.state = "lost";
          slot.sticky = true;
        }
        FailLocked(r,
                   absl::StrCat(DescribeRank(r), " lost: no heartbeat for ", SecondsText(silent),
                                " (timeout ", absl::FormatDuration(config_.heartbeat_timeout), ")"),
                   absl::StatusCode::kUnavailable, &out);
        break;
      }
    }
  }
  Run(out);
}

void Job::ForgiveStallLocked(absl::Duration gap, absl::Time now, std::vector<Completion>* out) {
  if (state_ == JobState::kRegistering) registration_stalled_ += gap;
  if (world_complete_.load(std::memory_order_acquire)) {
    for (int r = 0; r < num_ranks_; ++r) {
      RankSlot& slot = ranks_[static_cast<size_t>(r)];
      absl::MutexLock slot_lock(&slot.mu);
      slot.last_seen = std::min(slot.last_seen + gap, now);
    }
  }
  EventLocked(absl::StrCat("coordinator was not running for ", SecondsText(gap),
                           " (job suspended or stopped, or host paused); that time does not count "
                           "against heartbeats"),
              out);
}

JobStatus Job::Status() const {
  absl::ReaderMutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  JobStatus s;
  s.job_id = config_.job_id;
  s.state = state_;
  s.finished = FinishedLocked();
  s.generation = config_.generation;
  s.world_size = config_.world_size;
  s.registered = static_cast<int>(slots_.size());
  s.num_nodes = num_nodes_;
  s.uptime_seconds = absl::ToDoubleSeconds(now - start_);
  s.failed_rank = failed_rank_;
  s.failure_reason = failure_reason_;
  if (has_checkpoint_) {
    s.checkpoint_epoch = checkpoint_.epoch;
    s.checkpoint_step = checkpoint_.step;
    s.checkpoint_path = checkpoint_.path;
  }
  double loss_sum = 0;
  int64_t min_step = -1;
  const bool complete = world_complete_.load(std::memory_order_acquire);
  const int n = complete ? num_ranks_ : 0;
  s.ranks.reserve(complete ? static_cast<size_t>(n) : slots_.size());
  for (int r = 0; r < n; ++r) {
    const RankSlot& slot = ranks_[static_cast<size_t>(r)];
    RankStatus& rs = s.ranks.emplace_back();
    rs.rank = r;
    rs.host = slot.who.host;
    rs.node_rank = slot.who.node_rank;
    rs.local_rank = slot.who.local_rank;
    rs.pid = slot.who.pid;
    ProgressReport progress;
    {
      absl::MutexLock slot_lock(&slot.mu);
      progress = slot.progress;
      rs.state = slot.state;
      rs.last_seen_seconds = absl::ToDoubleSeconds(now - slot.last_seen);
    }
    rs.epoch = progress.epoch;
    rs.step = progress.step;
    rs.loss = progress.loss;
    rs.samples_per_second = progress.samples_per_second;
    loss_sum += progress.loss;
    s.samples_per_second += progress.samples_per_second;
    s.epoch = std::max(s.epoch, progress.epoch);
    s.epochs = std::max(s.epochs, progress.epochs);
    s.steps_per_epoch = std::max(s.steps_per_epoch, progress.steps_per_epoch);
    if (min_step < 0 || progress.step < min_step) min_step = progress.step;
  }
  if (!complete) {
    for (const auto& [key, slot] : slots_) {
      RankStatus rs;
      rs.rank = -1;
      rs.host = slot.who.host;
      rs.node_rank = slot.who.node_rank;
      rs.local_rank = slot.who.local_rank;
      rs.pid = slot.who.pid;
      rs.state = "registered";
      s.ranks.push_back(rs);
    }
  } else {
    s.loss = loss_sum / static_cast<double>(n);
    s.step = std::max<int64_t>(min_step, 0);
    const double elapsed = absl::ToDoubleSeconds(now - running_since_);
    const int64_t total = s.epochs * s.steps_per_epoch;
    if (s.step > 0 && elapsed > 0 && total > s.step && state_ == JobState::kRunning) {
      s.eta_seconds = static_cast<double>(total - s.step) * elapsed / static_cast<double>(s.step);
    }
  }
  s.events.assign(events_.begin(), events_.end());
  return s;
}

bool Job::Finished() const {
  absl::ReaderMutexLock lock(&mu_);
  return FinishedLocked();
}

bool Job::WaitFinished(absl::Duration timeout) const {
  absl::ReaderMutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(this, &Job::FinishedLocked), timeout);
  return FinishedLocked();
}

int Job::ExitCode() const {
  absl::ReaderMutexLock lock(&mu_);
  if (state_ == JobState::kSucceeded) return 0;
  if (stopped_) return kExitStopped;
  return 1;
}

}  // namespace ddp
