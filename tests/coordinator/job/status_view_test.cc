#include "coordinator/job/status_view.h"

#include <vector>

#include "gtest/gtest.h"

namespace ddp {
namespace {

ProgressReport P(int64_t step, double loss, double sps, int64_t epoch = 0) {
  ProgressReport p;
  p.epoch = epoch;
  p.epochs = 3;
  p.step = step;
  p.steps_per_epoch = 10;
  p.loss = loss;
  p.samples_per_second = sps;
  return p;
}

TEST(StatusViewTest, SummarizeProgress) {
  struct Case {
    const char* name;
    std::vector<ProgressReport> progress;
    bool running;
    double seconds;
    int64_t want_step;
    double want_loss;
    double want_sps;
    double want_eta;
  };
  const std::vector<Case> cases = {
      {"slowest step, mean loss, summed throughput",
       {P(12, 1.0, 50, 1), P(10, 3.0, 50, 1)},
       true,
       5,
       10,
       2.0,
       100,
       10.0},
      {"no ETA before the first step", {P(0, 1.0, 0)}, true, 5, 0, 1.0, 0, -1},
      {"no ETA when not running", {P(10, 1.0, 50)}, false, 5, 10, 1.0, 50, -1},
      {"no ETA at the end", {P(30, 1.0, 50)}, true, 5, 30, 1.0, 50, -1},
  };
  for (const Case& c : cases) {
    JobStatus s;
    SummarizeProgress(c.progress, c.running, c.seconds, &s);
    EXPECT_EQ(s.step, c.want_step) << c.name;
    EXPECT_DOUBLE_EQ(s.loss, c.want_loss) << c.name;
    EXPECT_DOUBLE_EQ(s.samples_per_second, c.want_sps) << c.name;
    EXPECT_DOUBLE_EQ(s.eta_seconds, c.want_eta) << c.name;
    EXPECT_EQ(s.epochs, 3) << c.name;
    EXPECT_EQ(s.steps_per_epoch, 10) << c.name;
  }
  JobStatus empty;
  SummarizeProgress({}, true, 5, &empty);
  EXPECT_EQ(empty.step, 0);
  EXPECT_DOUBLE_EQ(empty.eta_seconds, -1);
}

TEST(StatusViewTest, Rows) {
  WorkerIdentity w;
  w.host = "h";
  w.node_rank = 1;
  w.local_rank = 2;
  w.pid = 33;
  RankSample sample;
  sample.state = RankState::kTraining;
  sample.progress = P(7, 0.5, 9, 1);
  sample.progress.step_phase = StepPhase::kAllreduce;
  sample.progress.phase_seconds = 0.25;
  sample.since_seen = absl::Milliseconds(1500);
  RankStatus r = RankRow(5, w, sample);
  EXPECT_EQ(r.rank, 5);
  EXPECT_EQ(r.host, "h");
  EXPECT_EQ(r.node_rank, 1);
  EXPECT_EQ(r.local_rank, 2);
  EXPECT_EQ(r.pid, 33);
  EXPECT_EQ(r.state, RankState::kTraining);
  EXPECT_EQ(r.phase, StepPhase::kAllreduce);
  EXPECT_DOUBLE_EQ(r.phase_seconds, 0.25);
  EXPECT_EQ(r.step, 7);
  EXPECT_DOUBLE_EQ(r.last_seen_seconds, 1.5);
  RankStatus reg = RegisteredRow(w);
  EXPECT_EQ(reg.rank, -1);
  EXPECT_EQ(reg.state, RankState::kRegistered);
  EXPECT_EQ(reg.pid, 33);
}

}  // namespace
}  // namespace ddp
