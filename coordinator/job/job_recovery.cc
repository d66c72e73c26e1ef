// Job's in-job recovery (proto/coordinator.proto, RECOVERY): lost workers, survivors rejoining,
// the next membership generation, and the recovery's deadlines. Same class and lock as job.cc.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/job/failure_causes.h"
#include "coordinator/job/job.h"

namespace ddp {

absl::StatusOr<LostDecision> Job::ReportLost(const LostWorker& lost) {
  Completions out;
  absl::MutexLock lock(&mu_);
  if (const std::string* retired = RetiredLocked(lost.node_rank, lost.local_rank, lost.pid)) {
    // A worker of a retired node (handed to a spare, or lost with the coordinator), fenced by its
    // task.
    const std::string who = absl::StrCat("node ", lost.node_rank, " local rank ", lost.local_rank,
                                         " (pid ", lost.pid, ")");
    EventLocked(absl::StrCat(who, ", replaced, ", lost.what, "; its node's task leaves"), &out);
    LostDecision leave{who, LostAction::kLeave};
    leave.retired = *retired;
    return leave;
  }
  const WorkerIdentity* w = membership_.Find(lost.node_rank, lost.local_rank);
  const bool vacant = membership_.vacant(lost.node_rank, lost.local_rank);
  if (w == nullptr || (w->pid != lost.pid && !vacant)) {
    return absl::NotFoundError(absl::StrCat("no registered worker at node ", lost.node_rank,
                                            " local rank ", lost.local_rank, " with pid ",
                                            lost.pid));
  }
  const std::string worker = Membership::DescribeWorker(*w);
  recovery_.NodeReported(lost.node_rank);  // its launcher lives: not a lost node
  // Its task saw it die: a Rejoin or Register of it still on its way is not to take the slot.
  membership_.NoteDead(lost.node_rank, lost.local_rank, lost.pid);
  if (!membership_.world_complete()) {
    FailLocked(CauseOfLostWorker(-1, worker, lost), absl::StatusCode::kAborted,
               absl::InfinitePast(), &out);
    return LostDecision{worker, LostAction::kStop};
  }
  const int rank = membership_.RankOf(lost.node_rank, lost.local_rank);
  if (rank < 0) return absl::InternalError("registered worker has no rank");
  if (vacant) {
    if (w->pid == lost.pid) {
      // Already lost (silent); the recovery awaits its replacement.
      if (rank >= 0 && recovery_.node_tasks().WasFenced(rank, lost.pid)) {
        EventLocked(absl::StrCat(membership_.Describe(rank), " fenced: its node's task reports it ",
                                 lost.what),
                    &out);
      }
      return LostDecision{membership_.Describe(rank),
                          recovery_.in_progress() ? LostAction::kRespawn : LostAction::kStop};
    }
    // A replacement that died before it registered: not started again; the deadline decides.
    WorkerIdentity replacement = *w;
    replacement.pid = lost.pid;
    const std::string who = Membership::DescribeWorker(replacement);
    membership_.NoteFailedStart(lost.node_rank, lost.local_rank, lost.what);
    EventLocked(absl::StrCat("replacement for rank ", rank, " ", who, " ", lost.what,
                             " before registering; not started again"),
                &out);
    return LostDecision{who, FinishedLocked() ? LostAction::kStop : LostAction::kWait};
  }
  // The slot's worker: a member of the current table, or a replacement that registered for the
  // generation being formed and died before it was complete.
  const std::string who = membership_.who(rank).pid == lost.pid
                              ? membership_.Describe(rank)
                              : absl::StrCat("rank ", rank, " replacement ", worker);
  const RankState state = liveness_.Sample(rank, clock_->Now()).state;
  if (IsFinal(state) && state != RankState::kLost && !FinishedLocked()) {
    // It reported its outcome before dying: nothing to recover.
    EventLocked(absl::StrCat(who, " ", lost.what, " after reporting"), &out);
    return LostDecision{who, LostAction::kWait};
  }
  const LostAction action = LoseRankLocked(rank, CauseOfLostWorker(rank, who, lost), &out);
  return LostDecision{who, action};
}

absl::StatusOr<std::vector<FenceOrder>> Job::Fences(int node_rank,
                                                    const std::vector<LiveWorker>& live) {
  Completions out;
  absl::MutexLock lock(&mu_);
  recovery_.node_tasks().Asked(node_rank, clock_->Now());
  std::vector<FenceOrder> orders;
  if (FinishedLocked()) return orders;  // the launchers stop every worker themselves
  for (const LiveWorker& w : live) {
    if (const std::string* retired = RetiredLocked(node_rank, w.local_rank, w.pid)) {
      orders.push_back(FenceOrder{w.local_rank, w.pid, *retired});
      continue;
    }
    const WorkerIdentity* id = membership_.Find(node_rank, w.local_rank);
    if (id == nullptr || id->pid != w.pid || !membership_.vacant(node_rank, w.local_rank)) {
      continue;
    }
    const int rank = membership_.RankOf(node_rank, w.local_rank);
    if (recovery_.node_tasks().NoteFence(rank, w.pid)) {
      EventLocked(absl::StrCat(membership_.Describe(rank),
                               " was declared lost but its process still runs: fenced (its "
                               "node's task kills it before its slot is filled again)"),
                  &out);
    }
    orders.push_back(FenceOrder{w.local_rank, w.pid, recovery_.LossOf(rank)});
  }
  return orders;
}

LostAction Job::LoseRankLocked(int rank, const FailureCause& cause, Completions* out) {
  const absl::Time now = clock_->Now();
  liveness_.Finish(rank, RankState::kLost, /*reported=*/false, now);
  if (FinishedLocked()) {
    const int earlier_rank = lifecycle_.failure().rank;
    if (lifecycle_.Reattribute(cause, now)) {
      if (config_.journal != nullptr) config_.journal->JobFailed(lifecycle_.failure());
      // The earlier report (typically a peer's "connection reset" in a collective) followed from
      // this death: the dead rank is the cause.
      EventLocked(absl::StrCat("root cause: ", cause.text, " (",
                               earlier_rank >= 0 ? membership_.Describe(earlier_rank) : "a peer",
                               " failed after it)"),
                  out);
    } else {
      EventLocked(cause.text, out);
    }
    return LostAction::kStop;
  }
  recovery_.Lose(cause, now);
  // A loss during a recovery begun for a collective failure nobody explained is what it was,
  // and takes the restart that one used (Recovery::TakeRestart).
  const int done = lifecycle_.ranks_done();
  if (done > 0 || !recovery_.TakeRestart()) {
    FailureCause final_cause = cause;
    if (done > 0 && recovery_.CanRestart()) {
      absl::StrAppend(&final_cause.text, "; cannot recover: ", done, " rank(s) already finished");
    } else {
      final_cause = recovery_.ExhaustedCause(cause);
    }
    recovery_.Abandon();
    FailLocked(final_cause, absl::StatusCode::kAborted, absl::InfinitePast(), out);
    return LostAction::kStop;
  }
  membership_.Vacate(rank, cause.text, absl::AbortedError(cause.text), out);
  BeginRecoveryLocked(cause, out);
  return LostAction::kRespawn;
}

void Job::BeginRecoveryLocked(const FailureCause& cause, Completions* out) {
  const bool already = recovery_.in_progress();
  recovery_.Begin(cause, clock_->Now());
  membership_.BeginNext();
  const std::string budget =
      absl::StrCat("restart ", recovery_.restarts(), " of ", recovery_.max_restarts());
  if (already) {
    EventLocked(absl::StrCat("also lost during the recovery: ", cause.text, "; ", budget), out);
  } else {
    lifecycle_.BeginRecovery();
    StateChangedLocked(absl::StrCat(cause.text, "; ", budget, "; forming membership generation ",
                                    membership_.forming()),
                       out);
  }
  AnnounceGenerationLocked();
  if (membership_.GenerationComplete()) CompleteRecoveryLocked(out);
}

void Job::CompleteRecoveryLocked(Completions* out) {
  const absl::Time now = clock_->Now();
  const GenerationNote note{recovery_.restarts(), recovery_.cause(), recovery_.Elapsed(now)};
  // Smaller than the table it replaces: a lost node was dropped (shrinking).
  const bool shrank = membership_.world_size() < membership_.num_ranks();
  const std::vector<int> revived = membership_.Complete(note, out);
  if (config_.journal != nullptr) {
    config_.journal->GenerationFormed(*membership_.table(), recovery_.restarts());
  }
  recovery_.End(now, revived);
  rejoined_ = 0;
  if (shrank) {
    // Every rank is renumbered in the smaller world: each starts afresh, and the ranks beyond it
    // are gone for good.
    const int world = membership_.world_size();
    for (int rank = 0; rank < liveness_.num_ranks(); ++rank) {
      if (rank < world) {
        liveness_.Revive(rank, now);
      } else {
        liveness_.Finish(rank, RankState::kLost, /*reported=*/true, now);
      }
      stall_watch_.ResetPace(rank);
    }
    shards_.Reset(world);
  } else {
    for (int rank : revived) liveness_.Revive(rank, now);
    shards_.Reset();
  }
  spares_.Settle();
  published_.exit_orders().Clear();  // no rank of the new generation is told to exit
  stall_watch_.NewGeneration(now);
  straggler_watch_.Reset();  // ranks may be renumbered: scores start afresh
  lifecycle_.EndRecovery();
  AnnounceGenerationLocked();
  StateChangedLocked(
      absl::StrCat("membership generation ", membership_.current(), " complete after ",
                   SecondsText(absl::Seconds(recovery_.last_seconds())),
                   revived.empty() ? std::string(" (same members)")
                                   : absl::StrCat(revived.size() == 1 ? " (rank " : " (ranks ",
                                                  absl::StrJoin(revived, ","), " replaced)"),
                   lifecycle_.stop_requested() ? "; the stop goes on" : ""),
      out);
  events_.LogOnlyLines(membership_.RankTableLines(), out);
}

void Job::Rejoin(int rank, int pid, const RejoinRequest& request, RegisterCallback done_as_is) {
  RegisterCallback done = WithHeartbeatInterval(std::move(done_as_is));
  absl::Status error = membership_.CheckWorker(rank, pid);
  Completions out;
  if (error.ok()) {
    absl::MutexLock lock(&mu_);
    if (lifecycle_.state() == JobState::kFailed) {
      error = absl::AbortedError(lifecycle_.failure().text);
    } else if (FinishedLocked()) {
      error = absl::FailedPreconditionError(
          absl::StrCat("job already finished (", JobStateName(lifecycle_.state()), ")"));
    } else if (request.membership_generation < membership_.current()) {
      error = absl::FailedPreconditionError(absl::StrCat(
          "rank ", rank, " rejoins from membership generation ", request.membership_generation,
          " but generation ", membership_.current(), " is complete"));
    } else if (const WorkerIdentity w = membership_.who(rank);
               const std::string* retired = RetiredLocked(w.node_rank, w.local_rank, pid)) {
      // Its collective failed before its task fenced it: its slot is someone else's now.
      error = absl::FailedPreconditionError(absl::StrCat(
          "rank ", rank, " (pid ", pid, "): ", *retired, ": this worker does not rejoin"));
    } else {
      const std::string who = membership_.Describe(rank);
      absl::StatusOr<bool> complete = membership_.Rejoin(rank, request.committed_step, done);
      if (!complete.ok()) {
        error = complete.status();
        events_.LogOnly(absl::StrCat(who, "'s rejoin refused: ", error.message()), &out);
      } else {
        // A large world logs the first rejoin of a recovery (what broke it) and then a count at
        // each tenth, as registrations do.
        const int world = membership_.world_size();
        ++rejoined_;
        if (world <= kRegistrationsLoggedEach || rejoined_ == 1) {
          events_.LogOnly(
              absl::StrCat(who, " rejoins at step ", request.committed_step, ": ", request.reason),
              &out);
        } else if (rejoined_ * 10 / world != (rejoined_ - 1) * 10 / world) {
          events_.LogOnly(absl::StrCat("rejoined ", rejoined_, " of ", world, " workers"), &out);
        }
        const absl::Time now = clock_->Now();
        if (recovery_.in_progress()) {
          if (*complete) CompleteRecoveryLocked(&out);
        } else if (!recovery_.CanRestart() || lifecycle_.ranks_done() > 0) {
          // Fail fast, as a failed collective always did; a death reported soon after is
          // likely what broke it (revisable).
          FailLocked(CauseOfWorkerOutcome(rank, who, absl::UnavailableError(request.reason)),
                     absl::StatusCode::kAborted, now + kRootCauseWindow, &out);
        } else {
          // Wait for the loss that broke it (TickRecoveryLocked).
          recovery_.RejoinedEarly(now, who, request.reason);
        }
      }
    }
  }
  if (!error.ok()) done(error);
}

void Job::TickRecoveryLocked(absl::Time now, Completions* out) {
  if (FinishedLocked()) return;
  if (recovery_.in_progress()) {
    if (now < recovery_.deadline()) return;
    recovery_.Abandon();
    FailLocked(CauseOfRecoveryTimeout(config_.recovery_timeout, membership_.MissingMembers()),
               absl::StatusCode::kDeadlineExceeded, absl::InfinitePast(), out);
    return;
  }
  const std::optional<FailureCause> cause = recovery_.Unexplained(now, kRootCauseWindow);
  if (!cause) return;
  if (!recovery_.CanRestart() || lifecycle_.ranks_done() > 0) {
    FailLocked(recovery_.ExhaustedCause(*cause), absl::StatusCode::kAborted, absl::InfinitePast(),
               out);
    return;
  }
  recovery_.UseRestartForUnexplained();
  BeginRecoveryLocked(*cause, out);
}

void Job::AnnounceGenerationLocked() {
  published_.Announce(std::max<int64_t>(0, membership_.forming()));
}

}  // namespace ddp
