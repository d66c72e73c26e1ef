#include "proto/convert.h"

#include <string>
#include <utility>

namespace ddp {

namespace pb = ::slurm_ddp::v1;

namespace {

// One table per enum, read in both directions, so a value cannot map one way only.
template <typename A, typename B, size_t N>
B Forward(const std::pair<A, B> (&table)[N], A in, B fallback) {
  for (const auto& [a, b] : table) {
    if (a == in) return b;
  }
  return fallback;
}
template <typename A, typename B, size_t N>
A Backward(const std::pair<A, B> (&table)[N], B in, A fallback) {
  for (const auto& [a, b] : table) {
    if (b == in) return a;
  }
  return fallback;
}

constexpr std::pair<JobState, pb::JobState> kJobStates[] = {
    {JobState::kRegistering, pb::JOB_STATE_REGISTERING},
    {JobState::kRunning, pb::JOB_STATE_RUNNING},
    {JobState::kRecovering, pb::JOB_STATE_RECOVERING},
    {JobState::kStopping, pb::JOB_STATE_STOPPING},
    {JobState::kStopped, pb::JOB_STATE_STOPPED},
    {JobState::kSucceeded, pb::JOB_STATE_SUCCEEDED},
    {JobState::kFailed, pb::JOB_STATE_FAILED},
};

constexpr std::pair<RankState, pb::RankState> kRankStates[] = {
    {RankState::kRegistered, pb::RANK_STATE_REGISTERED},
    {RankState::kStarting, pb::RANK_STATE_STARTING},
    {RankState::kTraining, pb::RANK_STATE_TRAINING},
    {RankState::kEvaluating, pb::RANK_STATE_EVALUATING},
    {RankState::kCheckpointing, pb::RANK_STATE_CHECKPOINTING},
    {RankState::kFinished, pb::RANK_STATE_FINISHED},
    {RankState::kDone, pb::RANK_STATE_DONE},
    {RankState::kStopped, pb::RANK_STATE_STOPPED},
    {RankState::kFailed, pb::RANK_STATE_FAILED},
    {RankState::kLost, pb::RANK_STATE_LOST},
    {RankState::kStalled, pb::RANK_STATE_STALLED},
};

constexpr std::pair<StepPhase, pb::StepPhase> kStepPhases[] = {
    {StepPhase::kNone, pb::STEP_PHASE_NONE},
    {StepPhase::kData, pb::STEP_PHASE_DATA},
    {StepPhase::kForward, pb::STEP_PHASE_FORWARD},
    {StepPhase::kBackward, pb::STEP_PHASE_BACKWARD},
    {StepPhase::kAllreduce, pb::STEP_PHASE_ALLREDUCE},
    {StepPhase::kOptimizer, pb::STEP_PHASE_OPTIMIZER},
    {StepPhase::kCheckpoint, pb::STEP_PHASE_CHECKPOINT},
    {StepPhase::kEval, pb::STEP_PHASE_EVAL},
    {StepPhase::kRecovery, pb::STEP_PHASE_RECOVERY},
};

constexpr std::pair<WorkerPhase, pb::WorkerPhase> kWorkerPhases[] = {
    {WorkerPhase::kStarting, pb::PHASE_STARTING},
    {WorkerPhase::kTraining, pb::PHASE_TRAINING},
    {WorkerPhase::kEvaluating, pb::PHASE_EVALUATING},
    {WorkerPhase::kCheckpointing, pb::PHASE_CHECKPOINTING},
    {WorkerPhase::kFinished, pb::PHASE_FINISHED},
};

constexpr std::pair<FailureKind, pb::FailureKind> kFailureKinds[] = {
    {FailureKind::kNone, pb::FAILURE_KIND_NONE},
    {FailureKind::kSignal, pb::FAILURE_KIND_SIGNAL},
    {FailureKind::kExitCode, pb::FAILURE_KIND_EXIT_CODE},
    {FailureKind::kLostHeartbeat, pb::FAILURE_KIND_LOST_HEARTBEAT},
    {FailureKind::kStall, pb::FAILURE_KIND_STALL},
    {FailureKind::kCollectiveError, pb::FAILURE_KIND_COLLECTIVE_ERROR},
    {FailureKind::kWorkerError, pb::FAILURE_KIND_WORKER_ERROR},
    {FailureKind::kRegistrationTimeout, pb::FAILURE_KIND_REGISTRATION_TIMEOUT},
    {FailureKind::kCoordinatorLost, pb::FAILURE_KIND_COORDINATOR_LOST},
    {FailureKind::kOperatorStop, pb::FAILURE_KIND_OPERATOR_STOP},
    {FailureKind::kStragglerReplaced, pb::FAILURE_KIND_STRAGGLER_REPLACED},
};

constexpr std::pair<Command, pb::Command> kCommands[] = {
    {Command::kContinue, pb::CONTINUE},
    {Command::kCheckpointAndStop, pb::CHECKPOINT_AND_STOP},
    {Command::kAbort, pb::ABORT},
    {Command::kExit, pb::EXIT},
};

}  // namespace

pb::JobState ToProto(JobState in) { return Forward(kJobStates, in, pb::JOB_STATE_UNSPECIFIED); }
JobState FromProto(pb::JobState in) { return Backward(kJobStates, in, JobState::kFailed); }
pb::RankState ToProto(RankState in) { return Forward(kRankStates, in, pb::RANK_STATE_UNSPECIFIED); }
RankState FromProto(pb::RankState in) { return Backward(kRankStates, in, RankState::kStarting); }
pb::StepPhase ToProto(StepPhase in) { return Forward(kStepPhases, in, pb::STEP_PHASE_NONE); }
StepPhase FromProto(pb::StepPhase in) { return Backward(kStepPhases, in, StepPhase::kNone); }
pb::WorkerPhase ToProto(WorkerPhase in) { return Forward(kWorkerPhases, in, pb::PHASE_STARTING); }
WorkerPhase FromProto(pb::WorkerPhase in) {
  return Backward(kWorkerPhases, in, WorkerPhase::kStarting);
}
pb::FailureKind ToProto(FailureKind in) {
  return Forward(kFailureKinds, in, pb::FAILURE_KIND_WORKER_ERROR);
}
FailureKind FromProto(pb::FailureKind in) {
  return Backward(kFailureKinds, in, FailureKind::kWorkerError);
}
pb::Command ToProto(Command in) { return Forward(kCommands, in, pb::CONTINUE); }
Command FromProto(pb::Command in) { return Backward(kCommands, in, Command::kContinue); }

void ToProto(const FailureCause& in, pb::FailureCause* out) {
  out->set_rank(in.rank);
  out->set_kind(ToProto(in.kind));
  out->set_text(in.text);
}

FailureCause FromProto(const pb::FailureCause& in) {
  FailureCause c;
  c.rank = in.rank();
  c.kind = FromProto(in.kind());
  c.text = in.text();
  return c;
}

void ToProto(const RankStatus& r, pb::RankStatus* p) {
  p->set_rank(r.rank);
  p->set_host(r.host);
  p->set_node_rank(r.node_rank);
  p->set_local_rank(r.local_rank);
  p->set_pid(r.pid);
  p->set_state(ToProto(r.state));
  p->set_phase(ToProto(r.phase));
  p->set_phase_seconds(r.phase_seconds);
  p->set_epoch(r.epoch);
  p->set_step(r.step);
  p->set_loss(r.loss);
  p->set_samples_per_second(r.samples_per_second);
  p->set_last_seen_seconds(r.last_seen_seconds);
  StragglerToProto(r.score, p);
}

void ToProto(const JobStatus& in, pb::JobStatus* out) {
  ToProtoWithoutRanks(in, out);
  out->mutable_ranks()->Reserve(static_cast<int>(in.ranks.size()));
  for (const RankStatus& r : in.ranks) ToProto(r, out->add_ranks());
}

void ToProtoWithoutRanks(const JobStatus& in, pb::JobStatus* out) {
  out->set_job_id(in.job_id);
  out->set_state(ToProto(in.state));
  out->set_finished(in.finished);
  out->set_generation(in.generation);
  out->set_world_size(in.world_size);
  out->set_registered(in.registered);
  out->set_num_nodes(in.num_nodes);
  out->set_epoch(in.epoch);
  out->set_epochs(in.epochs);
  out->set_step(in.step);
  out->set_steps_per_epoch(in.steps_per_epoch);
  out->set_loss(in.loss);
  out->set_samples_per_second(in.samples_per_second);
  out->set_eta_seconds(in.eta_seconds);
  out->set_uptime_seconds(in.uptime_seconds);
  if (!in.failure.empty()) ToProto(in.failure, out->mutable_failure());
  out->set_stop_reason(in.stop_reason);
  out->set_checkpoint_epoch(in.checkpoint_epoch);
  out->set_checkpoint_step(in.checkpoint_step);
  out->set_checkpoint_path(in.checkpoint_path);
  for (const std::string& e : in.events) out->add_events(e);
  RecoveryToProto(in, out);
  StragglerToProto(in, out);
  if (in.stall.present()) {
    pb::StallReport* st = out->mutable_stall();
    st->set_rank(in.stall.rank);
    st->set_phase(ToProto(in.stall.phase));
    st->set_seconds(in.stall.seconds);
    st->set_budget_seconds(in.stall.budget_seconds);
    for (const PhaseCount& c : in.stall.peers) {
      pb::PhaseCount* p = st->add_peers();
      p->set_phase(ToProto(c.phase));
      p->set_ranks(c.ranks);
    }
  }
}

JobStatus FromProto(const pb::JobStatus& in) {
  JobStatus s;
  s.job_id = in.job_id();
  s.state = FromProto(in.state());
  s.finished = in.finished();
  s.generation = in.generation();
  s.world_size = in.world_size();
  s.registered = in.registered();
  s.num_nodes = in.num_nodes();
  s.epoch = in.epoch();
  s.epochs = in.epochs();
  s.step = in.step();
  s.steps_per_epoch = in.steps_per_epoch();
  s.loss = in.loss();
  s.samples_per_second = in.samples_per_second();
  s.eta_seconds = in.eta_seconds();
  s.uptime_seconds = in.uptime_seconds();
  if (in.has_failure()) s.failure = FromProto(in.failure());
  s.stop_reason = in.stop_reason();
  s.checkpoint_epoch = in.checkpoint_epoch();
  s.checkpoint_step = in.checkpoint_step();
  s.checkpoint_path = in.checkpoint_path();
  s.ranks.reserve(static_cast<size_t>(in.ranks_size()));
  for (const pb::RankStatus& p : in.ranks()) {
    RankStatus& r = s.ranks.emplace_back();
    r.rank = p.rank();
    r.host = p.host();
    r.node_rank = p.node_rank();
    r.local_rank = p.local_rank();
    r.pid = p.pid();
    r.state = FromProto(p.state());
    r.phase = FromProto(p.phase());
    r.phase_seconds = p.phase_seconds();
    r.epoch = p.epoch();
    r.step = p.step();
    r.loss = p.loss();
    r.samples_per_second = p.samples_per_second();
    r.last_seen_seconds = p.last_seen_seconds();
    StragglerFromProto(p, &r.score);
  }
  s.events.assign(in.events().begin(), in.events().end());
  RecoveryFromProto(in, &s);
  StragglerFromProto(in, &s);
  if (in.has_stall()) {
    const pb::StallReport& st = in.stall();
    s.stall.rank = st.rank();
    s.stall.phase = FromProto(st.phase());
    s.stall.seconds = st.seconds();
    s.stall.budget_seconds = st.budget_seconds();
    for (const pb::PhaseCount& p : st.peers())
      s.stall.peers.push_back({FromProto(p.phase()), p.ranks()});
  }
  return s;
}

void ToProto(const WorkerIdentity& in, pb::RegisterRequest* out) {
  out->set_host(in.host);
  out->set_node_rank(in.node_rank);
  out->set_local_rank(in.local_rank);
  out->set_local_world_size(in.local_world_size);
  out->set_pid(in.pid);
  out->set_nonce(in.nonce);
  out->set_node_name(in.node_name);
  if (in.first_shard) ToProto(*in.first_shard, out->mutable_first_shard());
}

WorkerIdentity FromProto(const pb::RegisterRequest& in) {
  WorkerIdentity w;
  w.host = in.host();
  w.node_rank = in.node_rank();
  w.local_rank = in.local_rank();
  w.local_world_size = in.local_world_size();
  w.pid = in.pid();
  w.nonce = in.nonce();
  w.node_name = in.node_name();
  if (in.has_first_shard()) w.first_shard = FromProto(in.first_shard());
  return w;
}

void ToProto(const RankAssignment& in, pb::RegisterReply* out) {
  out->set_rank(in.rank);
  out->set_world_size(in.world_size);
  out->set_local_rank(in.local_rank);
  out->set_local_world_size(in.local_world_size);
  out->set_node_rank(in.node_rank);
  out->set_num_nodes(in.num_nodes);
  out->set_generation(in.generation);
  RecoveryToProto(in, out);
  if (in.first_shard) {
    pb::ShardResult* shard = out->mutable_first_shard();
    if (in.first_shard->ok()) {
      ToProto(**in.first_shard, shard->mutable_reply());
    } else {
      ToWire(in.first_shard->status(), shard);
    }
  }
}

RankAssignment FromProto(const pb::RegisterReply& in) {
  RankAssignment a;
  a.rank = in.rank();
  a.world_size = in.world_size();
  a.local_rank = in.local_rank();
  a.local_world_size = in.local_world_size();
  a.node_rank = in.node_rank();
  a.num_nodes = in.num_nodes();
  a.generation = in.generation();
  RecoveryFromProto(in, &a);
  if (in.has_first_shard()) {
    const absl::Status st = FromWire(in.first_shard());
    a.first_shard = st.ok() ? absl::StatusOr<ShardAssignment>(FromProto(in.first_shard().reply()))
                            : absl::StatusOr<ShardAssignment>(st);
  }
  return a;
}

void ToProto(const ShardRequest& in, pb::GetShardRequest* out) {
  out->set_epoch(in.epoch);
  out->set_dataset_size(in.dataset_size);
  out->set_seed(in.seed);
  out->set_shuffle(in.shuffle);
  out->set_drop_last(in.drop_last);
  out->set_resume_consumed(in.resume_consumed);
  out->set_resume_world_size(in.resume_world_size);
}

ShardRequest FromProto(const pb::GetShardRequest& in) {
  ShardRequest r;
  r.epoch = in.epoch();
  r.dataset_size = in.dataset_size();
  r.seed = in.seed();
  r.shuffle = in.shuffle();
  r.drop_last = in.drop_last();
  r.resume_consumed = in.resume_consumed();
  r.resume_world_size = in.resume_world_size();
  return r;
}

void ToProto(const ShardAssignment& in, pb::GetShardReply* out) {
  out->set_epoch(in.epoch);
  out->set_dataset_size(in.dataset_size);
  out->set_seed(in.seed);
  out->set_shuffle(in.shuffle);
  out->set_drop_last(in.drop_last);
  out->set_world_size(in.world_size);
  out->set_rank(in.rank);
  out->set_consumed(in.consumed);
  out->set_consumed_world_size(in.consumed_world_size);
}

ShardAssignment FromProto(const pb::GetShardReply& in) {
  ShardAssignment a;
  a.epoch = in.epoch();
  a.dataset_size = in.dataset_size();
  a.seed = in.seed();
  a.shuffle = in.shuffle();
  a.drop_last = in.drop_last();
  a.world_size = in.world_size();
  a.rank = in.rank();
  a.consumed = in.consumed();
  a.consumed_world_size = in.consumed_world_size();
  return a;
}

void ToProto(const ProgressReport& in, pb::Progress* out) {
  out->set_phase(ToProto(in.phase));
  out->set_step_phase(ToProto(in.step_phase));
  out->set_phase_seconds(in.phase_seconds);
  out->set_epoch(in.epoch);
  out->set_epochs(in.epochs);
  out->set_step(in.step);
  out->set_steps_per_epoch(in.steps_per_epoch);
  out->set_loss(in.loss);
  out->set_samples_per_second(in.samples_per_second);
  out->set_data_wait_share(in.data_wait_share);
  out->set_forward_ms(in.forward_ms);
  out->set_backward_ms(in.backward_ms);
  out->set_comm_wait_ms(in.comm_wait_ms);
  out->set_optimizer_ms(in.optimizer_ms);
  out->set_overlap_share(in.overlap_share);
  out->set_stop_signaled(in.stop_signaled);
  StragglerToProto(in.sections, out);
}

ProgressReport FromProto(const pb::Progress& in) {
  ProgressReport p;
  p.phase = FromProto(in.phase());
  p.step_phase = FromProto(in.step_phase());
  p.phase_seconds = in.phase_seconds();
  p.epoch = in.epoch();
  p.epochs = in.epochs();
  p.step = in.step();
  p.steps_per_epoch = in.steps_per_epoch();
  p.loss = in.loss();
  p.samples_per_second = in.samples_per_second();
  p.data_wait_share = in.data_wait_share();
  p.forward_ms = in.forward_ms();
  p.backward_ms = in.backward_ms();
  p.comm_wait_ms = in.comm_wait_ms();
  p.optimizer_ms = in.optimizer_ms();
  p.overlap_share = in.overlap_share();
  p.stop_signaled = in.stop_signaled();
  StragglerFromProto(in, &p.sections);
  return p;
}

void ToProto(const HeartbeatReply& in, pb::HeartbeatReply* out) {
  out->set_command(ToProto(in.command));
  out->set_reason(in.reason);
  if (!in.cause.empty()) ToProto(in.cause, out->mutable_cause());
  out->set_membership_generation(in.membership_generation);
  out->set_exit_code(in.exit_code);
}

HeartbeatReply FromProto(const pb::HeartbeatReply& in) {
  HeartbeatReply r;
  r.command = FromProto(in.command());
  r.reason = in.reason();
  if (in.has_cause()) r.cause = FromProto(in.cause());
  r.membership_generation = in.membership_generation();
  r.exit_code = in.exit_code();
  return r;
}

void ToProto(const CommittedCheckpoint& in, pb::CommitCheckpointRequest* out) {
  out->set_epoch(in.epoch);
  out->set_step(in.step);
  out->set_consumed(in.consumed);
  out->set_path(in.path);
}

CommittedCheckpoint FromProto(const pb::CommitCheckpointRequest& in) {
  CommittedCheckpoint c;
  c.epoch = in.epoch();
  c.step = in.step();
  c.consumed = in.consumed();
  c.path = in.path();
  return c;
}

void ToProto(const absl::Status& outcome, pb::ReportDoneRequest* out) {
  out->set_ok(outcome.ok());
  out->set_error_code(static_cast<int>(outcome.code()));
  out->set_message(std::string(outcome.message()));
}

namespace {
// A failure's code from the wire: 1..16, anything else UNKNOWN.
absl::StatusCode FailureCode(int code) {
  return code <= 0 || code > 16 ? absl::StatusCode::kUnknown : static_cast<absl::StatusCode>(code);
}
}  // namespace

absl::Status FromProto(const pb::ReportDoneRequest& in) {
  if (in.ok()) return absl::OkStatus();
  return absl::Status(FailureCode(in.error_code()),
                      in.message().empty() ? "worker failed" : in.message());
}

void ToProto(const absl::Status& outcome, pb::RankHeartbeatReply* out) { ToWire(outcome, out); }

absl::Status FromProto(const pb::RankHeartbeatReply& in) { return FromWire(in); }

absl::StatusCode WireCode(int code) {
  return code == 0 ? absl::StatusCode::kOk : FailureCode(code);
}

void ToProto(const LostWorker& in, pb::ReportLostRequest* out) {
  out->set_node_rank(in.node_rank);
  out->set_local_rank(in.local_rank);
  out->set_pid(in.pid);
  out->set_what(in.what);
  out->set_signal(in.signal);
  out->set_exit_code(in.exit_code);
}

LostWorker FromProto(const pb::ReportLostRequest& in) {
  LostWorker w;
  w.node_rank = in.node_rank();
  w.local_rank = in.local_rank();
  w.pid = in.pid();
  w.what = in.what().empty() ? std::string("died") : in.what();
  w.signal = in.signal();
  w.exit_code = in.exit_code();
  return w;
}

grpc::Status ToGrpc(const absl::Status& in) {
  if (in.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(in.code()), std::string(in.message()));
}

absl::Status FromGrpc(const grpc::Status& in) {
  return absl::Status(static_cast<absl::StatusCode>(in.error_code()), in.error_message());
}

}  // namespace ddp
