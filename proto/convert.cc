#include "proto/convert.h"

#include <string>

namespace ddp {

namespace pb = ::slurm_ddp::v1;

JobState JobStateFromName(const std::string& name) {
  for (JobState s : {JobState::kRegistering, JobState::kRunning, JobState::kStopping,
                     JobState::kSucceeded, JobState::kFailed}) {
    if (name == JobStateName(s)) return s;
  }
  return JobState::kFailed;
}

void ToProto(const JobStatus& in, pb::JobStatus* out) {
  out->set_job_id(in.job_id);
  out->set_state(JobStateName(in.state));
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
  out->set_failed_rank(in.failed_rank);
  out->set_failure_reason(in.failure_reason);
  out->set_checkpoint_epoch(in.checkpoint_epoch);
  out->set_checkpoint_step(in.checkpoint_step);
  out->set_checkpoint_path(in.checkpoint_path);
  out->mutable_ranks()->Reserve(static_cast<int>(in.ranks.size()));
  for (const RankStatus& r : in.ranks) {
    pb::RankStatus* p = out->add_ranks();
    p->set_rank(r.rank);
    p->set_host(r.host);
    p->set_node_rank(r.node_rank);
    p->set_local_rank(r.local_rank);
    p->set_pid(r.pid);
    p->set_state(r.state);
    p->set_epoch(r.epoch);
    p->set_step(r.step);
    p->set_loss(r.loss);
    p->set_samples_per_second(r.samples_per_second);
    p->set_last_seen_seconds(r.last_seen_seconds);
  }
  for (const std::string& e : in.events) out->add_events(e);
}

JobStatus FromProto(const pb::JobStatus& in) {
  JobStatus s;
  s.job_id = in.job_id();
  s.state = JobStateFromName(in.state());
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
  s.failed_rank = in.failed_rank();
  s.failure_reason = in.failure_reason();
  s.checkpoint_epoch = in.checkpoint_epoch();
  s.checkpoint_step = in.checkpoint_step();
  s.checkpoint_path = in.checkpoint_path();
  for (const pb::RankStatus& p : in.ranks()) {
    RankStatus r;
    r.rank = p.rank();
    r.host = p.host();
    r.node_rank = p.node_rank();
    r.local_rank = p.local_rank();
    r.pid = p.pid();
    r.state = p.state();
    r.epoch = p.epoch();
    r.step = p.step();
    r.loss = p.loss();
    r.samples_per_second = p.samples_per_second();
    r.last_seen_seconds = p.last_seen_seconds();
    s.ranks.push_back(std::move(r));
  }
  for (const std::string& e : in.events()) s.events.push_back(e);
  return s;
}

void ToProto(const ProgressReport& in, pb::Progress* out) {
  out->set_phase(static_cast<pb::WorkerPhase>(static_cast<int>(in.phase)));
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
}

ProgressReport FromProto(const pb::Progress& in) {
  ProgressReport p;
  int phase = static_cast<int>(in.phase());
  p.phase = (phase >= 0 && phase <= static_cast<int>(WorkerPhase::kFinished))
                ? static_cast<WorkerPhase>(phase)
                : WorkerPhase::kStarting;
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
  return p;
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

void ToProto(const RankAssignment& in, pb::RegisterReply* out) {
  out->set_rank(in.rank);
  out->set_world_size(in.world_size);
  out->set_local_rank(in.local_rank);
  out->set_local_world_size(in.local_world_size);
  out->set_node_rank(in.node_rank);
  out->set_num_nodes(in.num_nodes);
  out->set_generation(in.generation);
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
  return a;
}

}  // namespace ddp
