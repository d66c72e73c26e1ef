// The straggler rule (straggler_watch.h) on synthetic section totals driven by a simulated
// clock: the slow rank is the one with the largest busy time (its peers wait for it in
// communication), named only after the window, with its cause; one slow step, a pause of the
// whole job (evaluation, checkpoint) and noise under the threshold never name anyone; a rank
// that recovers clears within the window.
#include "coordinator/job/straggler_watch.h"

#include <vector>

#include "gtest/gtest.h"

namespace ddp {
namespace {

constexpr int kData = static_cast<int>(StepSection::kData);
constexpr int kCompute = static_cast<int>(StepSection::kCompute);
constexpr int kComm = static_cast<int>(StepSection::kCommunication);
constexpr int kOptimizer = static_cast<int>(StepSection::kOptimizer);

// A synchronous job of `n` ranks: every step takes the slowest rank's busy time; the others wait
// for it in communication. Heartbeats carry the totals once a second; the watch observes the
// latest and judges every half second, as Job does.
class Sim {
 public:
  explicit Sim(int n, StragglerOptions options = {}) : watch_(options), totals_(n), reported_(n) {
    for (int r = 0; r < n; ++r) busy_.push_back({0.010, 0.080, 0.010});  // data, compute, opt
  }
  // Rank `r` spends `factor` times its normal time in `section` from now on.
  void Slow(int r, int section, double factor) {
    busy_[r] = {0.010, 0.080, 0.010};
    busy_[r][section == kData ? 0 : section == kCompute ? 1 : 2] *= factor;
  }
  void Normal(int r) { busy_[r] = {0.010, 0.080, 0.010}; }
  // Runs `seconds` of steps (paused: no step, as in evaluation); `one_step_extra`: the next step
  // of rank `r` takes that much longer in compute (one slow step).
  void Run(double seconds, bool paused = false) {
    for (double t = 0; t < seconds; t += 0.5) {
      now_ += absl::Milliseconds(500);
      if (!paused) Steps(0.5);
      if (++ticks_ >= next_heartbeat_) {
        reported_ = totals_;
        next_heartbeat_ = ticks_ + (late_every_ > 0 && ++heartbeats_ % late_every_ == 0 ? 3 : 2);
      }
      Observe();  // each check, as Job does, with the latest heartbeat's totals
      for (const StragglerWatch::Change& c : watch_.Judge(now_)) changes_.push_back(c);
    }
  }
  // Every `every`-th heartbeat comes half a second late (the others a second apart).
  void LateHeartbeats(int every) { late_every_ = every; }
  void OneSlowStep(int r, double extra) {
    extra_rank_ = r;
    extra_ = extra;
  }

  StragglerWatch& watch() { return watch_; }
  const std::vector<StragglerWatch::Change>& changes() const { return changes_; }
  std::vector<int> Named() const {
    std::vector<int> out;
    for (const Straggler& s : watch_.stragglers()) out.push_back(s.rank);
    return out;
  }

 private:
  void Steps(double seconds) {
    double left = seconds;
    while (left > 0) {
      double step = 0;
      for (size_t r = 0; r < busy_.size(); ++r) {
        double b = busy_[r][0] + busy_[r][1] + busy_[r][2];
        if (static_cast<int>(r) == extra_rank_) b += extra_;
        step = std::max(step, b);
      }
      for (size_t r = 0; r < busy_.size(); ++r) {
        SectionTotals& t = totals_[r];
        double compute = busy_[r][1] + (static_cast<int>(r) == extra_rank_ ? extra_ : 0);
        t.seconds[kData] += busy_[r][0];
        t.seconds[kCompute] += compute;
        t.seconds[kOptimizer] += busy_[r][2];
        t.seconds[kComm] += step - (busy_[r][0] + compute + busy_[r][2]) + 0.001;
        ++t.steps;
      }
      extra_rank_ = -1;
      extra_ = 0;
      left -= step;
    }
  }
  void Observe() {
    for (size_t r = 0; r < totals_.size(); ++r) {
      watch_.Observe(static_cast<int>(r), reported_[r], true, now_);
    }
  }

  StragglerWatch watch_;
  std::vector<SectionTotals> totals_;
  std::vector<SectionTotals> reported_;  // as of the latest heartbeat
  std::vector<std::vector<double>> busy_;
  absl::Time now_ = absl::FromUnixSeconds(1000);
  int ticks_ = 0;
  int next_heartbeat_ = 2;
  int late_every_ = 0;
  int heartbeats_ = 0;
  int extra_rank_ = -1;
  double extra_ = 0;
  std::vector<StragglerWatch::Change> changes_;
};

TEST(StragglerWatch, TheSpanIsAThirdOfTheWindowWithinBounds) {
  EXPECT_EQ(StragglerWatch({0.75, absl::Seconds(30)}).span(), absl::Seconds(10));
  EXPECT_EQ(StragglerWatch({0.75, absl::Seconds(60)}).span(), absl::Seconds(10));
  EXPECT_EQ(StragglerWatch({0.75, absl::Seconds(9)}).span(), absl::Seconds(3));
  EXPECT_EQ(StragglerWatch({0.75, absl::Seconds(1)}).span(), absl::Milliseconds(500));
}

TEST(StragglerWatch, AHalfSpeedRankIsNamedAfterTheWindowWithComputeAsCause) {
  Sim sim(4);  // defaults: threshold 0.75, window 30 s
  sim.Run(20);
  EXPECT_TRUE(sim.Named().empty());
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(sim.watch().Score(r).measured);
    EXPECT_NEAR(sim.watch().Score(r).relative, 1.0, 1e-9);
  }
  sim.Slow(2, kCompute, 2.125);  // busy 0.1 -> 0.19: about half speed
  sim.Run(29);
  EXPECT_TRUE(sim.Named().empty()) << "not before --straggler-window";
  // Scored already: relative about 0.53; the others wait for it in communication, but the
  // communication score never names them.
  EXPECT_NEAR(sim.watch().Score(2).relative, 0.1 / 0.19, 0.01);
  EXPECT_NEAR(sim.watch().Score(2).individual, 0.1 / 0.19, 0.01);
  EXPECT_NEAR(sim.watch().Score(0).relative, 1.0, 1e-9);
  EXPECT_LT(sim.watch().Score(0).sections[kComm], 0.1);
  sim.Run(12);
  ASSERT_EQ(sim.Named(), std::vector<int>({2}));
  const Straggler s = sim.watch().stragglers()[0];
  EXPECT_EQ(s.section, StepSection::kCompute);
  EXPECT_NEAR(s.slower, 2.125, 0.01);
  EXPECT_LT(s.relative_score, 0.75);
  ASSERT_EQ(sim.changes().size(), 1u);
  EXPECT_TRUE(sim.changes()[0].appeared);
  EXPECT_TRUE(sim.watch().Score(2).straggler);
  // The breakdown is the slowest rank's step, with each section's spread.
  const StepBreakdown& b = sim.watch().breakdown();
  EXPECT_EQ(b.rank, 2);
  EXPECT_NEAR(b.seconds[kCompute], 0.17, 0.005);
  EXPECT_NEAR(b.spread[kCompute], 0.09, 0.005);
  EXPECT_NEAR(b.spread[kComm], 0.09, 0.005);

  // Back to normal: cleared within the window (span to leave the scores, span above).
  sim.Normal(2);
  sim.Run(21);
  EXPECT_TRUE(sim.Named().empty());
  ASSERT_EQ(sim.changes().size(), 2u);
  EXPECT_FALSE(sim.changes()[1].appeared);
}

TEST(StragglerWatch, AShortWindowKeepsItsEvidenceBetweenLateHeartbeats) {
  // --straggler-window 3: a span of 1 s, no longer than the heartbeat interval. Every other
  // heartbeat comes half a second late (a SIGSTOPped worker's heartbeat thread stops too), so a
  // check often finds no new totals within the span; the evidence must still count.
  Sim sim(2, {0.75, absl::Seconds(3)});
  sim.LateHeartbeats(2);
  sim.Run(5);
  EXPECT_TRUE(sim.Named().empty());
  EXPECT_TRUE(sim.watch().Score(0).measured);
  sim.Slow(1, kCompute, 2.125);
  sim.Run(2.5);
  EXPECT_TRUE(sim.Named().empty()) << "not before --straggler-window";
  sim.Run(4);
  ASSERT_EQ(sim.Named(), std::vector<int>({1}));
  EXPECT_EQ(sim.watch().stragglers()[0].section, StepSection::kCompute);
  sim.Normal(1);
  sim.Run(6);
  EXPECT_TRUE(sim.Named().empty());
  ASSERT_EQ(sim.changes().size(), 2u);
  // Without a heartbeat for longer than the span, one evidence period and one check, a rank is
  // not scored.
  StragglerWatch w({0.75, absl::Seconds(3)}, /*evidence_period=*/absl::Seconds(2));
  EXPECT_EQ(w.stale_after(), absl::Seconds(1) + absl::Seconds(2) + StragglerWatch::kCheckPeriod);
}

TEST(StragglerWatch, TheCauseIsTheSectionThatIsSlow) {
  Sim sim(4, {0.75, absl::Seconds(6)});
  sim.Slow(1, kData, 10);  // data 0.01 -> 0.1: busy 0.19
  sim.Run(12);
  ASSERT_EQ(sim.Named(), std::vector<int>({1}));
  EXPECT_EQ(sim.watch().stragglers()[0].section, StepSection::kData);
  EXPECT_NEAR(sim.watch().stragglers()[0].slower, 10, 0.1);
}

TEST(StragglerWatch, OneSlowStepIsNeverAStraggler) {
  Sim sim(4);
  sim.Run(20);
  // A step 25 s long (a long SIGSTOP), shorter than the window.
  sim.OneSlowStep(3, 25);
  sim.Run(60);
  EXPECT_TRUE(sim.Named().empty());
  EXPECT_TRUE(sim.changes().empty());
  // Ten slow steps in a row of 2 s each: 20 s under the threshold, still under the window.
  Sim again(4);
  again.Run(12);
  for (int i = 0; i < 10; ++i) {
    again.OneSlowStep(0, 2);
    again.Run(0.5);
  }
  again.Run(40);
  EXPECT_TRUE(again.changes().empty());
}

TEST(StragglerWatch, AWholeJobPauseNamesNobodyAndKeepsAStraggler) {
  Sim sim(4, {0.75, absl::Seconds(6)});
  sim.Run(10);
  sim.Run(60, /*paused=*/true);  // evaluation or a checkpoint: no step anywhere
  EXPECT_TRUE(sim.changes().empty());
  EXPECT_FALSE(sim.watch().Score(0).measured) << "no recent steps: not scored";
  sim.Slow(1, kCompute, 3);
  sim.Run(12);
  ASSERT_EQ(sim.Named(), std::vector<int>({1}));
  sim.Run(30, /*paused=*/true);
  EXPECT_EQ(sim.Named(), std::vector<int>({1})) << "cleared only on evidence";
  EXPECT_TRUE(sim.watch().Score(1).straggler);
}

TEST(StragglerWatch, AScoreThatComesBackAboveTheThresholdStartsTheWindowAgain) {
  Sim sim(4, {0.75, absl::Seconds(10)});
  sim.Run(5);
  for (int i = 0; i < 4; ++i) {  // 6 s slow, 8 s normal: never 10 s in a row under
    sim.Slow(2, kCompute, 2.5);
    sim.Run(6);
    sim.Normal(2);
    sim.Run(8);
  }
  EXPECT_TRUE(sim.changes().empty());
}

TEST(StragglerWatch, RanksThatStopWorkingOrGoBackAreHandled) {
  StragglerWatch w({0.75, absl::Seconds(3)});
  absl::Time now = absl::FromUnixSeconds(1);
  SectionTotals a, b;
  for (int i = 0; i < 20; ++i) {
    now += absl::Seconds(1);
    a.steps += 10;
    a.seconds[kCompute] += 1;
    b.steps += 10;
    b.seconds[kCompute] += 0.3;
    w.Observe(0, a, true, now);
    w.Observe(1, b, true, now);
    w.Judge(now);
  }
  ASSERT_EQ(w.stragglers().size(), 1u);
  EXPECT_EQ(w.stragglers()[0].rank, 0);
  // A new worker in the slot: its totals go back, its history starts afresh (the old straggler
  // stays named until the new one has been scored).
  SectionTotals fresh;
  w.Observe(0, fresh, true, now);
  EXPECT_EQ(w.stragglers().size(), 1u);
  // A rank that stops working is no straggler.
  w.Observe(0, fresh, false, now);
  const std::vector<StragglerWatch::Change> c = w.Judge(now);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_FALSE(c[0].appeared);
  EXPECT_TRUE(w.stragglers().empty());
  // Nonsense totals are ignored.
  SectionTotals bad = b;
  bad.seconds[kData] = -1;
  w.Observe(1, bad, true, now);
  EXPECT_FALSE(w.Score(5).measured);
  w.Reset();
  EXPECT_FALSE(w.Score(1).measured);
}

}  // namespace
}  // namespace ddp
