// Job::Status: the job as status readers see it, a JobStatus composed from the parts
// (status_view.h writes the rows and the job-wide progress). Same class and lock as job.cc.
#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/job/job.h"
#include "coordinator/job/status_view.h"

namespace ddp {

JobStatus Job::Status() const {
  absl::ReaderMutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  JobStatus s;
  s.job_id = config_.job_id;
  s.state = lifecycle_.state();
  s.finished = FinishedLocked();
  s.generation = config_.generation;
  // The current rank table's world (smaller once the job shrank), else the configured one.
  const std::shared_ptr<const RankTable> current = membership_.table();
  s.world_size = current != nullptr ? current->size() : config_.world_size;
  s.registered = membership_.registered();
  s.num_nodes = membership_.num_nodes();
  s.uptime_seconds = absl::ToDoubleSeconds(now - lifecycle_.start());
  s.failure = lifecycle_.failure();
  s.stop_reason = lifecycle_.stop_reason();
  if (!lifecycle_.stop_note().empty()) {
    absl::StrAppend(&s.stop_reason, "; ", lifecycle_.stop_note());
  }
  if (const CommittedCheckpoint* c = checkpoints_.latest()) {
    s.checkpoint_epoch = c->epoch;
    s.checkpoint_step = c->step;
    s.checkpoint_path = c->path;
  }
  s.restarts = recovery_.restarts();
  s.max_restarts = recovery_.max_restarts();
  s.last_recovery_seconds = recovery_.last_seconds();
  s.membership_generation = std::max<int64_t>(0, membership_.current());
  s.lost_ranks = recovery_.lost();
  s.spare_nodes = spares_.Standing(now);
  if (config_.journal != nullptr) s.journal = config_.journal->Health();
  s.coordinator = coordinator_;
  // The standby's rule is StandbyWatch::StandbyOf's (trainer/launcher/standby.h).
  if (config_.standby && s.num_nodes >= 2 && coordinator_.node >= 0) {
    CoordinatorInfo& c = s.coordinator;
    c.standby_node = (coordinator_.node + 1) % s.num_nodes;
    if (const WorkerIdentity* w = membership_.Find(c.standby_node, 0)) c.standby_host = w->host;
    c.standby_behind_records = s.journal.pending;
  }
  if (const std::shared_ptr<const RankTable> table = membership_.table()) {
    const int n = table->size();
    std::vector<ProgressReport> progress;
    progress.reserve(static_cast<size_t>(n));
    s.ranks.reserve(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      RankSample sample = liveness_.Sample(r, now);
      s.ranks.push_back(RankRow(r, table->ranks[static_cast<size_t>(r)], sample));
      progress.push_back(std::move(sample.progress));
    }
    SummarizeProgress(progress, s.state == JobState::kRunning,
                      absl::ToDoubleSeconds(now - lifecycle_.running_since()), &s);
  } else {
    for (const WorkerIdentity& w : membership_.Registered()) s.ranks.push_back(RegisteredRow(w));
  }
  for (const Stall& st : stall_watch_.stalls()) {
    if (st.rank < 0 || static_cast<size_t>(st.rank) >= s.ranks.size()) continue;
    RankStatus& row = s.ranks[static_cast<size_t>(st.rank)];
    if (!IsFinal(row.state)) row.state = RankState::kStalled;
  }
  if (!stall_watch_.stalls().empty()) {
    const Stall& st = stall_watch_.stalls().front();
    s.stall = {st.rank, st.phase, absl::ToDoubleSeconds(st.in_phase),
               absl::ToDoubleSeconds(st.budget), st.peers};
  }
  StragglerStatusLocked(now, &s);
  s.events = events_.Recent();
  return s;
}

}  // namespace ddp
