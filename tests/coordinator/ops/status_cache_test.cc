#include "coordinator/ops/status_cache.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "coordinator/ops/job_metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/convert.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;

class StatusCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    JobConfig c;
    c.job_id = "cache";
    c.world_size = 1;
    job_ = std::make_unique<Job>(c, &clock_);
  }
  void Join() {
    WorkerIdentity w;
    w.host = "h";
    w.pid = 3;
    job_->Register(w, [](absl::StatusOr<RankAssignment>) {});
  }
  FakeClock clock_;
  std::unique_ptr<Job> job_;
};

TEST_F(StatusCacheTest, EveryFormIsBuiltFromOneStatus) {
  StatusCache cache(job_.get(), &clock_, absl::Milliseconds(200));
  auto s = cache.Get();
  EXPECT_EQ(s->status.job_id, "cache");
  EXPECT_THAT(s->json, HasSubstr("\"state\":\"REGISTERING\""));
  EXPECT_THAT(s->metrics, HasSubstr("ddp_job_state{state=\"REGISTERING\"} 1"));
  slurm_ddp::v1::JobStatus parsed;
  ASSERT_TRUE(parsed.ParseFromString(s->proto_bytes));
  EXPECT_EQ(FromProto(parsed).state, JobState::kRegistering);
}

TEST_F(StatusCacheTest, AStateChangeIsNeverMissedProgressMayBeOld) {
  StatusCache cache(job_.get(), &clock_, absl::Milliseconds(200));
  const uint64_t built = cache.builds();
  EXPECT_FALSE(cache.Refresh()) << "not due yet";
  Join();  // a major change: the next Get rebuilds at once
  EXPECT_EQ(cache.Get()->status.state, JobState::kRunning);
  EXPECT_EQ(cache.builds(), built + 1);
  // A heartbeat is a minor change: served from the snapshot until it is max_age old.
  ProgressReport p;
  p.step = 9;
  ASSERT_TRUE(job_->Heartbeat(0, 3, p).ok());
  EXPECT_EQ(cache.Get()->status.step, 0);
  EXPECT_FALSE(cache.Refresh());
  clock_.Advance(absl::Milliseconds(250));
  EXPECT_TRUE(cache.Refresh());
  EXPECT_EQ(cache.Get()->status.step, 9);
  // Nothing changed: no rebuild until a second has passed (ages keep moving).
  clock_.Advance(absl::Milliseconds(250));
  EXPECT_FALSE(cache.Refresh());
  clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(cache.Refresh());
}

// A job of kWorld ranks, one per node, every one registered: a build costs measurable CPU.
constexpr int kWorld = 4096;
std::unique_ptr<Job> RunningJob(FakeClock* clock) {
  JobConfig c;
  c.job_id = "cost";
  c.world_size = kWorld;
  auto job = std::make_unique<Job>(c, clock);
  for (int i = 0; i < kWorld; ++i) {
    WorkerIdentity w;
    w.host = absl::StrCat("node", i);
    w.node_rank = i;
    w.local_world_size = 1;
    w.pid = 100 + i;
    job->Register(w, [](absl::StatusOr<RankAssignment>) {});
  }
  return job;
}

// Refresh() does not rebuild a changed job until kBuildCpuFactor x `cost` has passed, then does.
void ExpectRebuiltOnlyAfterTheBudget(StatusCache& cache, FakeClock& clock, absl::Duration cost) {
  clock.Advance(kBuildCpuFactor * cost - absl::Microseconds(1));
  EXPECT_FALSE(cache.Refresh()) << "rebuilt before " << kBuildCpuFactor << " x " << cost;
  clock.Advance(absl::Microseconds(2));
  EXPECT_TRUE(cache.Refresh()) << "not rebuilt after " << kBuildCpuFactor << " x " << cost;
}

// The ticker's rebuilds are spaced by the last build's CPU time (kBuildCpuFactor times it),
// whatever max_age says: a large world's snapshot costs tens of milliseconds to build.
TEST(StatusCacheCost, RefreshWaitsTenTimesTheLastBuildsCpuTime) {
  FakeClock clock;
  const std::unique_ptr<Job> running = RunningJob(&clock);
  Job& job = *running;
  StatusCache cache(&job, &clock, absl::Microseconds(1));
  ASSERT_EQ(cache.Get()->status.state, JobState::kRunning);
  for (int round = 0; round < 3; ++round) {
    const absl::Duration cost = cache.Current()->build_cpu;
    ASSERT_GT(cost, absl::ZeroDuration()) << "a 4096-rank build takes some CPU time";
    ProgressReport p;
    p.step = round + 1;
    ASSERT_TRUE(job.Heartbeat(0, 100, p).ok());  // a change: due once old enough
    ExpectRebuiltOnlyAfterTheBudget(cache, clock, cost);
    ASSERT_EQ(cache.Current()->status.ranks.size(), size_t{kWorld});
    EXPECT_EQ(cache.Current()->status.ranks[0].step, round + 1);
  }
}

// A state change (a major one: here an event) is rebuilt by the ticker without waiting for
// max_age, but not sooner than the CPU budget either: in a recovery of a large world its events
// and state changes come faster than a build's budget.
TEST(StatusCacheCost, AMajorChangeWaitsForTheCpuBudgetNotForMaxAge) {
  FakeClock clock;
  const std::unique_ptr<Job> running = RunningJob(&clock);
  Job& job = *running;
  StatusCache cache(&job, &clock, absl::Hours(1));
  ASSERT_EQ(cache.Get()->status.state, JobState::kRunning);
  const uint64_t built = cache.builds();
  const absl::Duration cost = cache.Current()->build_cpu;
  ASSERT_GT(cost, absl::ZeroDuration());
  job.Event("operator note");
  ExpectRebuiltOnlyAfterTheBudget(cache, clock, cost);  // not after max_age (an hour)
  EXPECT_EQ(cache.builds(), built + 1);
  // A reader still gets the change it may have caused at once, whatever the budget.
  job.Event("another note");
  EXPECT_FALSE(cache.Refresh());
  EXPECT_EQ(cache.Get()->major_version, job.major_version());
  EXPECT_EQ(cache.builds(), built + 2);
}

// A rebuild writes into the buffers of the snapshot replaced last, and only once no reader
// holds it: a snapshot in a reader's hands never changes.
TEST_F(StatusCacheTest, ARebuildReusesAReleasedSnapshotNeverAHeldOne) {
  StatusCache cache(job_.get(), &clock_, absl::Milliseconds(200));
  auto rebuild = [&] {
    clock_.Advance(absl::Seconds(2));  // due (ages moved), whatever changed
    EXPECT_TRUE(cache.Refresh());
    return cache.Get();
  };
  std::shared_ptr<const StatusSnapshot> held = cache.Get();
  const std::string held_json = held->json;
  const StatusSnapshot* second = rebuild().get();  // `held` is now the spare, still held
  std::shared_ptr<const StatusSnapshot> third = rebuild();
  EXPECT_NE(third.get(), held.get()) << "a held snapshot was rebuilt";
  EXPECT_EQ(held->json, held_json);
  // `second` was replaced by `third` and nobody holds it: the next build takes its buffers.
  std::shared_ptr<const StatusSnapshot> fourth = rebuild();
  EXPECT_EQ(fourth.get(), second);
  EXPECT_EQ(fourth->json, ToJson(fourth->status));
  std::string metrics;
  RenderJobMetrics(fourth->status, &metrics);
  EXPECT_EQ(fourth->metrics, metrics);
  EXPECT_NEAR(fourth->status.uptime_seconds, 6.0, 0.5);
  EXPECT_EQ(held->json, held_json);
}

}  // namespace
}  // namespace ddp
