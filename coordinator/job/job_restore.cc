// Job::Restore: a restarted coordinator takes over the state its journal recorded (journal.h).
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/job/job.h"

namespace ddp {

absl::Status Job::Restore(const JournalState& state) {
  Completions out;
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(RestoreLocked(state, &out));
  if (state.failure && !FinishedLocked()) {
    // It failed before the restart (the coordinator was lost while it lingered): failed again
    // with the recorded cause, so that the workers still running are told and the result is
    // written, as the lost coordinator would have. Not journaled again (it is already there).
    EventLocked(
        absl::StrCat("restored from the journal: the job had failed: ", state.failure->text), &out);
    FailLocked(*state.failure, absl::StatusCode::kAborted, absl::InfinitePast(), &out,
               /*journaled=*/false);
  }
  return absl::OkStatus();
}

absl::Status Job::RestoreLocked(const JournalState& state, Completions* out_ptr) {
  Completions& out = *out_ptr;
  if (state.header.world_size != config_.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("the journal's world size ",
                                                   state.header.world_size, " is not the job's ",
                                                   config_.world_size));
  }
  const absl::Time now = clock_->Now();
  if (state.checkpoint) (void)checkpoints_.Commit(*state.checkpoint);
  if (state.table) {
    const RankTable& table = *state.table;
    if (table.size() < 1 || table.size() > config_.world_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("the journal's rank table has ", table.size(), " ranks"));
    }
    membership_.Restore(table);
    liveness_.Start(table.size(), now);  // every rank gets heartbeat_timeout to re-attach
    restored_at_ = now;
    recovery_.RestoreRestarts(state.restarts);
    if (table.size() != config_.world_size) shards_.Reset(table.size());  // it had shrunk
    for (const auto& [epoch, request] : state.epochs) shards_.RestoreAgreed(epoch, request);
    AnnounceGenerationLocked();
    lifecycle_.Start();
    StateChangedLocked(absl::StrCat("restored from the journal (incarnation ", state.incarnation,
                                    "): membership generation ", table.generation, ", ",
                                    table.size(), " ranks on ", table.num_nodes, " node(s)",
                                    state.checkpoint ? absl::StrCat(", checkpoint at step ",
                                                                    state.checkpoint->step)
                                                     : std::string()),
                       &out);
    if (state.stop_reason) RequestGracefulStopLocked(*state.stop_reason, &out);
    // Ranks that reported their end stay finished (each on the worker that reported it): the job
    // ends when the others do, as it would have without the restart.
    int finished = 0;
    for (const auto& [rank, f] : state.finished) {
      if (rank >= table.size() || table.ranks[rank].pid != f.pid) continue;
      if (!liveness_.Finish(rank, f.stopped ? RankState::kStopped : RankState::kDone,
                            /*reported=*/true, now)) {
        continue;
      }
      ++finished;
    }
    if (finished > 0) {
      EventLocked(absl::StrCat("restored from the journal: ", finished, " of ", table.size(),
                               " ranks had already finished"),
                  &out);
    }
    for (int i = 0; i < finished; ++i) RankFinishedLocked(&out);
    return absl::OkStatus();
  }
  // Still registering: the recorded registrations hold their slots; each worker's retried
  // Register (same host and pid) joins its slot again and gets the answer.
  for (const WorkerIdentity& who : state.registered) {
    RegisterCallback ignore = [](const absl::StatusOr<RankAssignment>&) {};
    absl::StatusOr<Membership::JoinResult> joined =
        membership_.Join(who, ignore, absl::OkStatus(), &out);
    if (!joined.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("the journal's registration of ",
                                                     Membership::DescribeWorker(who),
                                                     " does not fit: ", joined.status().message()));
    }
  }
  EventLocked(absl::StrCat("restored from the journal (incarnation ", state.incarnation,
                           "): ", membership_.registered(), " of ", config_.world_size,
                           " workers registered"),
              &out);
  if (membership_.registered() == config_.world_size) CompleteRegistrationLocked(&out);
  return absl::OkStatus();
}

void Job::SetCoordinator(const CoordinatorInfo& info) {
  absl::MutexLock lock(&mu_);
  coordinator_ = info;
  ChangedLocked();
}

void Job::Event(const std::string& line) {
  Completions out;
  absl::MutexLock lock(&mu_);
  EventLocked(line, &out);
}

void Job::TakeOverFromLostNode(int node, int64_t epoch) {
  Completions out;
  absl::MutexLock lock(&mu_);
  const int slots = membership_.SlotsOnNode(node);
  const std::string described = membership_.DescribeNode(node);
  if (slots == 0 || FinishedLocked()) {
    EventLocked(absl::StrCat("coordinator epoch ", epoch, ": the lost coordinator's ", described,
                             " holds no rank of the job"),
                &out);
    return;
  }
  coordinator_lost_node_ = node;
  coordinator_lost_at_ = clock_->Now();
  EventLocked(absl::StrCat(described, " lost with its coordinator (its task, coordinator and ",
                           "workers); coordinator epoch ", epoch, " takes over"),
              &out);
  RetireNodeLocked(node, FailureKind::kLostHeartbeat, " lost with the coordinator's node",
                   absl::StrCat("its node was lost with the coordinator; coordinator epoch ", epoch,
                                " took the job over"),
                   &out);
}

}  // namespace ddp
