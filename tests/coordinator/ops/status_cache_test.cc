#include "coordinator/ops/status_cache.h"

#include <memory>

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

}  // namespace
}  // namespace ddp
