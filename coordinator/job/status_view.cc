#include "coordinator/job/status_view.h"

#include <algorithm>

namespace ddp {

RankStatus RankRow(int rank, const WorkerIdentity& who, const RankSample& sample) {
  RankStatus r;
  r.rank = rank;
  r.host = who.host;
  r.node_rank = who.node_rank;
  r.local_rank = who.local_rank;
  r.pid = who.pid;
  r.state = sample.state;
  r.phase = sample.progress.step_phase;
  r.phase_seconds = sample.progress.phase_seconds;
  r.epoch = sample.progress.epoch;
  r.step = sample.progress.step;
  r.loss = sample.progress.loss;
  r.samples_per_second = sample.progress.samples_per_second;
  r.last_seen_seconds = absl::ToDoubleSeconds(sample.since_seen);
  return r;
}

RankStatus RegisteredRow(const WorkerIdentity& who) {
  RankStatus r;
  r.rank = -1;
  r.host = who.host;
  r.node_rank = who.node_rank;
  r.local_rank = who.local_rank;
  r.pid = who.pid;
  r.state = RankState::kRegistered;
  return r;
}

void SummarizeProgress(const std::vector<ProgressReport>& progress, bool running,
                       double seconds_running, JobStatus* s) {
  if (progress.empty()) return;
  double loss_sum = 0;
  int64_t min_step = progress.front().step;
  for (const ProgressReport& p : progress) {
    loss_sum += p.loss;
    s->samples_per_second += p.samples_per_second;
    s->epoch = std::max(s->epoch, p.epoch);
    s->epochs = std::max(s->epochs, p.epochs);
    s->steps_per_epoch = std::max(s->steps_per_epoch, p.steps_per_epoch);
    min_step = std::min(min_step, p.step);
  }
  s->loss = loss_sum / static_cast<double>(progress.size());
  s->step = std::max<int64_t>(min_step, 0);
  const int64_t total = s->epochs * s->steps_per_epoch;
  if (running && s->step > 0 && seconds_running > 0 && total > s->step) {
    s->eta_seconds =
        static_cast<double>(total - s->step) * seconds_running / static_cast<double>(s->step);
  }
}

}  // namespace ddp
