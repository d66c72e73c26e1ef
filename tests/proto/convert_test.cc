#include "proto/convert.h"

#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ddp {
namespace {

namespace pb = ::slurm_ddp::v1;

// Every enum value maps to a distinct wire value and back; unknown wire values take the
// documented fallback.
template <typename Domain, typename Wire, size_t N>
void ExpectRoundTrip(const Domain (&all)[N], Wire unknown, Domain fallback) {
  std::set<int> wire;
  for (Domain d : all) {
    const Wire w = ToProto(d);
    EXPECT_TRUE(wire.insert(static_cast<int>(w)).second) << "two values share wire value " << w;
    EXPECT_EQ(FromProto(w), d) << static_cast<int>(d);
  }
  EXPECT_EQ(FromProto(unknown), fallback);
}

TEST(ConvertTest, EnumsRoundTrip) {
  ExpectRoundTrip(kAllJobStates, static_cast<pb::JobState>(99), JobState::kFailed);
  EXPECT_EQ(FromProto(pb::JOB_STATE_UNSPECIFIED), JobState::kFailed);
  ExpectRoundTrip(kAllRankStates, static_cast<pb::RankState>(99), RankState::kStarting);
  ExpectRoundTrip(kAllStepPhases, static_cast<pb::StepPhase>(99), StepPhase::kNone);
  ExpectRoundTrip(kAllFailureKinds, static_cast<pb::FailureKind>(99), FailureKind::kWorkerError);
  const WorkerPhase phases[] = {WorkerPhase::kStarting, WorkerPhase::kTraining,
                                WorkerPhase::kEvaluating, WorkerPhase::kCheckpointing,
                                WorkerPhase::kFinished};
  ExpectRoundTrip(phases, static_cast<pb::WorkerPhase>(99), WorkerPhase::kStarting);
  const Command commands[] = {Command::kContinue, Command::kCheckpointAndStop, Command::kAbort};
  ExpectRoundTrip(commands, static_cast<pb::Command>(99), Command::kContinue);
}

TEST(ConvertTest, JobStatusRoundTripsThroughTheWire) {
  JobStatus s;
  s.job_id = "j";
  s.state = JobState::kFailed;
  s.finished = true;
  s.generation = 2;
  s.world_size = 2;
  s.registered = 2;
  s.num_nodes = 1;
  s.epoch = 1;
  s.epochs = 3;
  s.step = 17;
  s.steps_per_epoch = 10;
  s.loss = 0.25;
  s.samples_per_second = 99;
  s.eta_seconds = -1;
  s.uptime_seconds = 12;
  s.failure = {1, FailureKind::kSignal, "rank 1 killed by signal 9"};
  s.stop_reason = "maintenance";
  s.checkpoint_epoch = 1;
  s.checkpoint_step = 10;
  s.checkpoint_path = "/c.pt";
  RankStatus r;
  r.rank = 1;
  r.host = "h";
  r.node_rank = 0;
  r.local_rank = 1;
  r.pid = 7;
  r.state = RankState::kLost;
  r.phase = StepPhase::kAllreduce;
  r.phase_seconds = 2.5;
  r.step = 17;
  r.last_seen_seconds = 3;
  RankStatus slow = r;
  slow.rank = 0;
  slow.state = RankState::kTraining;
  slow.score.measured = true;
  slow.score.relative = 0.5;
  slow.score.individual = 0.52;
  slow.score.sections[static_cast<int>(StepSection::kCompute)] = 0.48;
  slow.score.straggler = true;
  s.ranks = {slow, r};
  s.stragglers = {{0, "h", 0, StepSection::kCompute, 0.5, 2.1, 30.5, 42}};
  s.breakdown.rank = 0;
  s.breakdown.seconds[static_cast<int>(StepSection::kCompute)] = 0.2;
  s.breakdown.spread[static_cast<int>(StepSection::kCommunication)] = 0.1;
  s.time_use = {100, 90, 5, 0, 0, 3, 2, 0};
  s.events = {"+1.0s a", "+2.0s b"};
  s.journal = {JournalCondition::kFailed, "fdatasync: Input/output error", 12, 0, 3, 0.0};
  s.coordinator = {1, 1, "n1", 2, "n2", 5};
  pb::JobStatus wire;
  ToProto(s, &wire);
  pb::JobStatus parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  const JobStatus back = FromProto(parsed);
  EXPECT_EQ(ToJson(back), ToJson(s));
  EXPECT_EQ(back.failure.kind, FailureKind::kSignal);
  EXPECT_EQ(back.ranks[1].phase, StepPhase::kAllreduce);
  EXPECT_EQ(back.ranks[0].score, slow.score);
  EXPECT_FALSE(back.ranks[1].score.measured);
  ASSERT_EQ(back.stragglers.size(), 1u);
  EXPECT_EQ(back.stragglers[0].section, StepSection::kCompute);
  EXPECT_DOUBLE_EQ(back.stragglers[0].slower, 2.1);
  EXPECT_EQ(back.breakdown.rank, 0);
  EXPECT_DOUBLE_EQ(back.time_use.ettr(), 0.9);
  EXPECT_EQ(back.journal.state, JournalCondition::kFailed);
  EXPECT_EQ(back.journal.dropped, 3);
  EXPECT_EQ(back.coordinator.epoch, 1);
  EXPECT_EQ(back.coordinator.node, 1);
  EXPECT_EQ(back.coordinator.host, "n1");
  EXPECT_EQ(back.coordinator.standby_node, 2);
  EXPECT_EQ(back.coordinator.standby_host, "n2");
  EXPECT_EQ(back.coordinator.standby_behind_records, 5);
  // No failure: the field stays absent and comes back empty.
  s.failure = {};
  pb::JobStatus ok;
  ToProto(s, &ok);
  EXPECT_FALSE(ok.has_failure());
  EXPECT_TRUE(FromProto(ok).failure.empty());
  // No journal: absent on the wire, kNone back.
  s.journal = {};
  pb::JobStatus no_journal;
  ToProto(s, &no_journal);
  EXPECT_FALSE(no_journal.has_journal());
  EXPECT_EQ(FromProto(no_journal).journal.state, JournalCondition::kNone);
  // No standby: absent on the wire, none back; the coordinator itself is still there.
  s.coordinator = {0, 0, "n0", -1, "", 0};
  pb::JobStatus alone;
  ToProto(s, &alone);
  EXPECT_FALSE(alone.coordinator().has_standby());
  const JobStatus alone_back = FromProto(alone);
  EXPECT_EQ(alone_back.coordinator.host, "n0");
  EXPECT_FALSE(alone_back.coordinator.has_standby());
}

TEST(ConvertTest, WorkerMessagesRoundTrip) {
  WorkerIdentity who{"h", 1, 2, 4, 77, "nonce", "gpu07", std::nullopt};
  pb::RegisterRequest reg;
  ToProto(who, &reg);
  const WorkerIdentity who2 = FromProto(reg);
  EXPECT_EQ(who2.host, "h");
  EXPECT_EQ(who2.local_world_size, 4);
  EXPECT_EQ(who2.nonce, "nonce");
  EXPECT_EQ(who2.node_name, "gpu07");

  ShardRequest shard{3, 100, 7, false, true, 40, 2};
  pb::GetShardRequest sreq;
  ToProto(shard, &sreq);
  const ShardRequest shard2 = FromProto(sreq);
  EXPECT_EQ(shard2.epoch, 3);
  EXPECT_FALSE(shard2.shuffle);
  EXPECT_TRUE(shard2.drop_last);
  EXPECT_EQ(shard2.resume_world_size, 2);

  // A registration's first shard: absent unless asked; answered with an assignment or an error.
  EXPECT_FALSE(reg.has_first_shard());
  EXPECT_FALSE(who2.first_shard.has_value());
  who.first_shard = shard;
  pb::RegisterRequest reg_shard;
  ToProto(who, &reg_shard);
  ASSERT_TRUE(reg_shard.has_first_shard());
  const WorkerIdentity who3 = FromProto(reg_shard);
  ASSERT_TRUE(who3.first_shard.has_value());
  EXPECT_EQ(who3.first_shard->epoch, 3);
  EXPECT_EQ(who3.first_shard->resume_consumed, 40);
  RankAssignment ra;
  ra.rank = 5;
  pb::RegisterReply plain;
  ToProto(ra, &plain);
  EXPECT_FALSE(plain.has_first_shard());
  EXPECT_FALSE(FromProto(plain).first_shard.has_value());
  ShardAssignment granted{3, 100, 7, false, true, 8, 5, 40, 2};
  ra.first_shard = granted;
  pb::RegisterReply with_shard;
  ToProto(ra, &with_shard);
  const RankAssignment ra2 = FromProto(with_shard);
  ASSERT_TRUE(ra2.first_shard.has_value());
  ASSERT_TRUE(ra2.first_shard->ok());
  EXPECT_EQ((*ra2.first_shard)->rank, 5);
  EXPECT_EQ((*ra2.first_shard)->world_size, 8);
  EXPECT_EQ((*ra2.first_shard)->consumed, 40);
  ra.first_shard = absl::InvalidArgumentError("dataset_size must be positive");
  pb::RegisterReply refused;
  ToProto(ra, &refused);
  const RankAssignment ra3 = FromProto(refused);
  EXPECT_EQ(ra3.rank, 5);
  ASSERT_TRUE(ra3.first_shard.has_value());
  EXPECT_EQ(ra3.first_shard->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ra3.first_shard->status().message(), "dataset_size must be positive");

  ProgressReport p;
  p.phase = WorkerPhase::kCheckpointing;
  p.step_phase = StepPhase::kCheckpoint;
  p.phase_seconds = 4;
  p.step = 9;
  p.overlap_share = 0.5;
  p.sections.steps = 12;
  p.sections.seconds[static_cast<int>(StepSection::kCompute)] = 1.5;
  p.sections.seconds[static_cast<int>(StepSection::kOptimizer)] = 0.25;
  pb::Progress wp;
  ToProto(p, &wp);
  const ProgressReport p2 = FromProto(wp);
  EXPECT_EQ(p2.sections.steps, 12);
  EXPECT_DOUBLE_EQ(p2.sections.seconds[static_cast<int>(StepSection::kCompute)], 1.5);
  EXPECT_DOUBLE_EQ(p2.sections.seconds[static_cast<int>(StepSection::kOptimizer)], 0.25);
  EXPECT_DOUBLE_EQ(p2.sections.seconds[static_cast<int>(StepSection::kData)], 0);
  EXPECT_EQ(p2.phase, WorkerPhase::kCheckpointing);
  EXPECT_EQ(p2.step_phase, StepPhase::kCheckpoint);
  EXPECT_DOUBLE_EQ(p2.phase_seconds, 4);
  EXPECT_DOUBLE_EQ(p2.overlap_share, 0.5);

  HeartbeatReply hb{Command::kAbort, "why", {3, FailureKind::kStall, "rank 3 stalled"}};
  pb::HeartbeatReply whb;
  ToProto(hb, &whb);
  const HeartbeatReply hb2 = FromProto(whb);
  EXPECT_EQ(hb2.command, Command::kAbort);
  EXPECT_EQ(hb2.cause.rank, 3);
  EXPECT_EQ(hb2.cause.kind, FailureKind::kStall);
  EXPECT_TRUE(FromProto(pb::HeartbeatReply()).cause.empty());

  LostWorker lost{1, 0, 55, "killed by signal 9", 9, 0};
  pb::ReportLostRequest wl;
  ToProto(lost, &wl);
  const LostWorker lost2 = FromProto(wl);
  EXPECT_EQ(lost2.signal, 9);
  EXPECT_EQ(lost2.pid, 55);
  EXPECT_EQ(FromProto(pb::ReportLostRequest()).what, "died");

  SpareReport spare{3, 8, "n3", 77, "nonce"};
  pb::StandByRequest sr;
  ToProto(spare, &sr);
  const SpareReport spare2 = FromProto(sr);
  EXPECT_EQ(spare2.node_rank, 3);
  EXPECT_EQ(spare2.local_world_size, 8);
  EXPECT_EQ(spare2.host, "n3");
  EXPECT_EQ(spare2.pid, 77);
  EXPECT_EQ(spare2.nonce, "nonce");
  for (SpareAction a : {SpareAction::kWait, SpareAction::kTakeOver, SpareAction::kLeave}) {
    pb::StandByReply reply;
    ToProto(SpareDecision{a, 2, "node 2"}, &reply);
    const SpareDecision back = FromProto(reply);
    EXPECT_EQ(back.action, a);
    EXPECT_EQ(back.node_rank, 2);
    EXPECT_EQ(back.description, "node 2");
  }
  pb::StandByReply unknown;
  unknown.set_action(static_cast<pb::StandByAction>(9));
  EXPECT_EQ(FromProto(unknown).action, SpareAction::kWait);
}

TEST(ConvertTest, LostActionsRoundTrip) {
  for (LostAction a :
       {LostAction::kStop, LostAction::kRespawn, LostAction::kWait, LostAction::kLeave}) {
    pb::ReportLostReply reply;
    ToProto(LostDecision{"rank 2", a}, &reply);
    EXPECT_EQ(FromProto(reply).action, a);
    EXPECT_EQ(FromProto(reply).description, "rank 2");
    EXPECT_EQ(FromProto(reply).retired, "");
  }
  LostDecision leave{"node 0 local rank 1 (pid 7)", LostAction::kLeave};
  leave.retired = "its node was lost with the coordinator; coordinator epoch 1 took the job over";
  pb::ReportLostReply reply;
  ToProto(leave, &reply);
  EXPECT_EQ(FromProto(reply).retired, leave.retired);
}

TEST(ConvertTest, OutcomesAndRpcStatus) {
  struct Case {
    absl::Status outcome;
    absl::StatusCode want;
  };
  const std::vector<Case> cases = {
      {absl::OkStatus(), absl::StatusCode::kOk},
      {absl::CancelledError("stopped"), absl::StatusCode::kCancelled},
      {absl::UnavailableError("reset"), absl::StatusCode::kUnavailable},
      {absl::Status(static_cast<absl::StatusCode>(42), "odd"), absl::StatusCode::kUnknown},
  };
  for (const Case& c : cases) {
    pb::ReportDoneRequest req;
    ToProto(c.outcome, &req);
    EXPECT_EQ(FromProto(req).code(), c.want) << c.outcome;
    EXPECT_EQ(FromGrpc(ToGrpc(c.outcome)).code(), c.outcome.code()) << c.outcome;
    pb::RankHeartbeatReply beat;  // one beat's outcome in a NodeHeartbeat
    ToProto(c.outcome, &beat);
    EXPECT_EQ(FromProto(beat).code(), c.want) << c.outcome;
    EXPECT_EQ(FromProto(beat).message(), c.outcome.message()) << c.outcome;
  }
  pb::ReportDoneRequest empty_message;
  empty_message.set_ok(false);
  empty_message.set_error_code(13);
  EXPECT_EQ(FromProto(empty_message).message(), "worker failed");
}

}  // namespace
}  // namespace ddp
