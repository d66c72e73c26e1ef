#include "coordinator/ops/status_render.h"

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "proto/convert.h"
#include "proto/coordinator.pb.h"

namespace ddp {
namespace {

// What the snapshot must publish: the full renderings of `s`.
void ExpectSameAsFull(const JobStatus& s, const StatusRender::Output& out) {
  EXPECT_EQ(out.json, ToJson(s));
  std::string metrics;
  RenderJobMetrics(s, &metrics);
  EXPECT_EQ(out.metrics, metrics);
  slurm_ddp::v1::JobStatus parsed;
  ASSERT_TRUE(parsed.ParseFromString(out.proto_bytes));
  slurm_ddp::v1::JobStatus full;
  ToProto(s, &full);
  // Serialized again, a parsed message is in canonical field order: equal bytes, equal messages.
  EXPECT_EQ(parsed.SerializeAsString(), full.SerializeAsString());
}

JobStatus World(int n) {
  JobStatus s;
  s.job_id = "render";
  s.state = JobState::kRunning;
  s.world_size = n;
  s.registered = n;
  for (int r = 0; r < n; ++r) {
    RankStatus& row = s.ranks.emplace_back();
    row.rank = r;
    row.host = absl::StrCat("node", r / 8);
    row.local_rank = r % 8;
    row.node_rank = r / 8;
    row.pid = 1000 + r;
    row.state = RankState::kTraining;
    row.phase = StepPhase::kForward;
    row.last_seen_seconds = 0.25;
  }
  return s;
}

TEST(StatusRenderTest, OnlyChangedRanksAreRenderedAgainAndTheOutputIsTheFullOne) {
  StatusRender render;
  StatusRender::Output out;
  JobStatus s = World(64);
  render.Render(s, &out);
  EXPECT_EQ(render.rendered_last(), 64u);
  ExpectSameAsFull(s, out);

  // Time passes: every last_seen_seconds moves, no row is rendered again.
  for (RankStatus& r : s.ranks) r.last_seen_seconds += 0.2;
  s.uptime_seconds = 12;
  render.Render(s, &out);
  EXPECT_EQ(render.rendered_last(), 0u);
  ExpectSameAsFull(s, out);

  // Three ranks heartbeat: their progress moves, only they are rendered again.
  for (int r : {0, 17, 63}) {
    s.ranks[static_cast<size_t>(r)].step = 5;
    s.ranks[static_cast<size_t>(r)].last_seen_seconds = 0;
  }
  render.Render(s, &out);
  EXPECT_EQ(render.rendered_last(), 3u);
  ExpectSameAsFull(s, out);

  // The world shrinks (a dropped node) and grows back.
  s.ranks.resize(56);
  render.Render(s, &out);
  ExpectSameAsFull(s, out);
  s = World(64);
  render.Render(s, &out);
  ExpectSameAsFull(s, out);
}

TEST(StatusRenderTest, OddValuesRenderAsTheFullRenderingDoes) {
  StatusRender render;
  StatusRender::Output out;
  JobStatus s = World(6);
  s.ranks[0].last_seen_seconds = -0.0;  // proto3 writes it: its bits are not all zero
  s.ranks[1].loss = std::numeric_limits<double>::quiet_NaN();  // JSON null; never equal, redone
  s.ranks[2].host = "q\"uote\\d \u00e9";  // escaped (hosts are valid UTF-8: registration checks)
  s.ranks[3].phase = StepPhase::kNone;    // JSON null, no phase line
  s.ranks[4].rank = -1;                   // not ranked yet: no rank lines
  s.ranks[4].state = RankState::kRegistered;
  s.ranks[5].last_seen_seconds = std::numeric_limits<double>::infinity();
  for (int i = 0; i < 3; ++i) {
    render.Render(s, &out);
    ExpectSameAsFull(s, out);
    for (RankStatus& r : s.ranks) r.last_seen_seconds += 0.5;  // none falls silent
  }
  EXPECT_EQ(render.rendered_last(), 1u) << "only the NaN row is never equal to itself";
}

// A rank's verdict (JudgeRank) is part of its row: a rank that falls silent, or behind the others'
// median, is rendered again with its flag, although nothing of its own row changed.
TEST(StatusRenderTest, ARankWhoseFlagChangesIsRenderedAgain) {
  StatusRender render;
  StatusRender::Output out;
  JobStatus s = World(8);
  for (RankStatus& r : s.ranks) r.step = 100;
  render.Render(s, &out);
  s.ranks[3].last_seen_seconds = 2.5;  // silent
  render.Render(s, &out);
  EXPECT_EQ(render.rendered_last(), 1u);
  EXPECT_NE(out.json.find("\"flag\":\"silent\""), std::string::npos) << out.json;
  ExpectSameAsFull(s, out);
  // Everyone else moves on: rank 5, which did not, is now behind (and the others' rows change).
  for (RankStatus& r : s.ranks) r.step = 110;
  s.ranks[5].step = 100;
  render.Render(s, &out);
  EXPECT_NE(out.json.find("\"flag\":\"behind\",\"behind_by\":10"), std::string::npos);
  ExpectSameAsFull(s, out);
}

// Random changes, build after build, against the full renderings.
TEST(StatusRenderTest, RandomChangesKeepTheOutputEqualToTheFullOne) {
  std::mt19937 rng(7);
  StatusRender render;
  StatusRender::Output out;
  JobStatus s = World(200);
  for (int build = 0; build < 40; ++build) {
    for (RankStatus& r : s.ranks) {
      r.last_seen_seconds = std::uniform_real_distribution<double>(0, 3)(rng);
      switch (std::uniform_int_distribution<int>(0, 30)(rng)) {
        case 0:
          r.step += 1;
          break;
        case 1:
          r.loss = std::uniform_real_distribution<double>(0, 2)(rng);
          break;
        case 2:
          r.phase = static_cast<StepPhase>(build % 9);
          break;
        case 3:
          r.state = RankState::kLost;
          break;
        case 4:
          r.phase_seconds += 0.5;
          break;
        case 5:
          r.samples_per_second = build;
          break;
        case 6:
          r.pid += 1;
          break;
        case 7:
          r.host += "x";
          break;
        default:
          break;
      }
    }
    if (build % 10 == 9) s.ranks.resize(s.ranks.size() - 10);
    s.step = build;
    render.Render(s, &out);
    ExpectSameAsFull(s, out);
  }
}

}  // namespace
}  // namespace ddp
