// FromJson (common/job_status.h): the status JSON read back with nlohmann/json, as ddpctl
// status --from and the tests read it. What ToJson writes reads back to the same bytes; the
// decided fields (flag, behind_by, final, exit_code) are read as sent, never decided again.
#include <string>

#include "common/exit_codes.h"
#include "common/job_status.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

// What ToJson writes, FromJson reads back: every field, the decided ones as decided.
TEST(JobStatusTest, FromJsonReadsWhatToJsonWrites) {
  JobStatus s;
  s.job_id = "j\"1\xff";
  s.state = JobState::kStopped;
  s.finished = true;
  s.generation = 2;
  s.world_size = 3;
  s.registered = 3;
  s.num_nodes = 2;
  s.epoch = 1;
  s.epochs = 4;
  s.step = 77;
  s.steps_per_epoch = 50;
  s.loss = 0.125;
  s.samples_per_second = 1234.5;
  s.eta_seconds = 12;
  s.uptime_seconds = 99.5;
  s.stop_reason = "ddpctl stop";
  s.checkpoint_epoch = 1;
  s.checkpoint_step = 75;
  s.checkpoint_path = "/ckpt/a.pt";
  s.events = {"+1.0s started", "+2.0s stop"};
  s.restarts = 1;
  s.max_restarts = 3;
  s.last_recovery_seconds = 2.5;
  s.membership_generation = 1;
  s.lost_ranks.push_back({{2, FailureKind::kSignal, "killed"}, 4.0, true});
  s.spare_nodes = 1;
  s.stall = {1, StepPhase::kData, 62, 60, {{StepPhase::kAllreduce, 2}}};
  for (RankState st : {RankState::kStopped, RankState::kStalled, RankState::kTraining}) {
    RankStatus r;
    r.rank = static_cast<int>(s.ranks.size());
    r.host = "node" + std::to_string(r.rank);
    r.node_rank = r.rank / 2;
    r.local_rank = r.rank % 2;
    r.pid = 1000 + r.rank;
    r.state = st;
    r.phase = StepPhase::kForward;
    r.phase_seconds = 0.5;
    r.epoch = 1;
    r.step = 10 * r.rank;
    r.loss = 0.5;
    r.samples_per_second = 10;
    r.last_seen_seconds = 0.25 + r.rank;
    s.ranks.push_back(r);
  }
  s.ranks[2].score.measured = true;
  s.ranks[2].score.relative = 0.5;
  s.ranks[2].score.individual = 0.625;
  s.ranks[2].score.sections[static_cast<int>(StepSection::kCompute)] = 0.25;
  s.ranks[2].score.straggler = true;
  s.stragglers = {{2, "node2", 1, StepSection::kCompute, 0.5, 4, 30.5, 42}};
  s.breakdown.rank = 2;
  s.breakdown.seconds[static_cast<int>(StepSection::kCompute)] = 0.25;
  s.breakdown.spread[static_cast<int>(StepSection::kCommunication)] = 0.125;
  s.time_use = {100, 80, 10, 5, 0, 3, 2, 0};
  s.coordinator = {2, 1, "n1", 0, "n0", 4};
  const std::string json = ToJson(s);
  absl::StatusOr<JobStatus> back = FromJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(ToJson(*back), json);
  EXPECT_EQ(back->state, JobState::kStopped);
  EXPECT_EQ(back->exit_code, kExitResumable);
  EXPECT_EQ(back->job_id, "j\"1\xef\xbf\xbd");
  ASSERT_EQ(back->ranks.size(), 3u);
  JobStatus decided = s;
  DecideStatus(&decided);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back->ranks[i].flag, decided.ranks[i].flag) << i;
    EXPECT_EQ(back->ranks[i].behind_by, decided.ranks[i].behind_by) << i;
    EXPECT_EQ(back->ranks[i].final, decided.ranks[i].final) << i;
  }
  EXPECT_EQ(back->ranks[1].flag, RankFlag::kStalled);
  EXPECT_EQ(back->stall.peers.size(), 1u);
  EXPECT_TRUE(back->ranks[2].score.straggler);
  EXPECT_EQ(back->ranks[2].score, s.ranks[2].score);
  EXPECT_FALSE(back->ranks[0].score.measured);
  ASSERT_EQ(back->stragglers.size(), 1u);
  EXPECT_EQ(back->stragglers[0].section, StepSection::kCompute);
  EXPECT_EQ(back->stragglers[0].node_rank, 1);
  EXPECT_DOUBLE_EQ(back->breakdown.seconds[static_cast<int>(StepSection::kCompute)], 0.25);
  EXPECT_DOUBLE_EQ(back->time_use.ettr(), 0.8);
  EXPECT_NE(json.find("\"ettr\":0.8"), std::string::npos) << json;
  EXPECT_NE(json.find("\"coordinator\":{\"epoch\":2,\"node\":1,\"host\":\"n1\",\"takeovers\":2,"
                      "\"standby\":{\"node\":0,\"host\":\"n0\",\"behind_records\":4}}"),
            std::string::npos)
      << json;
  EXPECT_EQ(back->coordinator.epoch, 2);
  EXPECT_EQ(back->coordinator.node, 1);
  EXPECT_EQ(back->coordinator.host, "n1");
  EXPECT_EQ(back->coordinator.standby_node, 0);
  EXPECT_EQ(back->coordinator.standby_host, "n0");
  EXPECT_EQ(back->coordinator.standby_behind_records, 4);
  // No standby: `standby` is null, and reads back as none.
  s.coordinator = {0, 0, "n0", -1, "", 0};
  const std::string alone = ToJson(s);
  EXPECT_NE(alone.find("\"coordinator\":{\"epoch\":0,\"node\":0,\"host\":\"n0\",\"takeovers\":0,"
                       "\"standby\":null}"),
            std::string::npos)
      << alone;
  absl::StatusOr<JobStatus> alone_back = FromJson(alone);
  ASSERT_TRUE(alone_back.ok()) << alone_back.status();
  EXPECT_FALSE(alone_back->coordinator.has_standby());
  EXPECT_EQ(ToJson(*alone_back), alone);
  EXPECT_NE(json.find("\"stragglers\":[{\"rank\":2,\"host\":\"node2\",\"node\":1,"
                      "\"section\":\"compute\",\"relative_score\":0.5"),
            std::string::npos)
      << json;
}

// A screen shows the JSON's decisions as they are, even where the rules would say otherwise.
TEST(JobStatusTest, FromJsonKeepsTheDecidedFieldsAsSent) {
  absl::StatusOr<JobStatus> s =
      FromJson(R"({"job_id":"x","state":"FAILED","finished":true,"exit_code":0,"ranks":[)"
               R"({"rank":0,"state":"training","flag":"lost","behind_by":7,"final":true},)"
               R"({"rank":1,"state":"failed","flag":null,"final":false},)"
               R"({"rank":2,"state":"training","flag":"something-new"}]})");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->exit_code, 0);
  EXPECT_EQ(s->ranks[0].flag, RankFlag::kLost);
  EXPECT_EQ(s->ranks[0].behind_by, 7);
  EXPECT_TRUE(s->ranks[0].final);
  EXPECT_EQ(s->ranks[1].flag, RankFlag::kNone);
  EXPECT_FALSE(s->ranks[1].final);
  EXPECT_EQ(s->ranks[2].flag, RankFlag::kNone);  // a flag this reader does not know
}

TEST(JobStatusTest, FromJsonRefusesWhatIsNotAStatus) {
  for (const char* bad :
       {"", "[]", "{", "{\"step\":\"ten\"}", "{\"ranks\":{}}", "{\"ranks\":[1]}",
        "{\"world_size\":99999999999}", "{\"exit_code\":1.5}", "{\"finished\":1}"}) {
    EXPECT_FALSE(FromJson(bad).ok()) << bad;
  }
  EXPECT_TRUE(FromJson("{}").ok());
}

}  // namespace
}  // namespace ddp
