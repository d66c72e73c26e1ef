// The in-job recovery part of proto/convert.h: lost-worker decisions, Rejoin, and the recovery
// fields of rank assignments and job status.
#include <string>
#include <utility>
#include <vector>

#include "proto/convert.h"

namespace ddp {

namespace pb = ::slurm_ddp::v1;

namespace {

constexpr std::pair<LostAction, pb::LostAction> kLostActions[] = {
    {LostAction::kStop, pb::LOST_ACTION_STOP},
    {LostAction::kRespawn, pb::LOST_ACTION_RESPAWN},
    {LostAction::kWait, pb::LOST_ACTION_WAIT},
    {LostAction::kLeave, pb::LOST_ACTION_LEAVE},
};

constexpr std::pair<SpareAction, pb::StandByAction> kSpareActions[] = {
    {SpareAction::kWait, pb::STAND_BY_WAIT},
    {SpareAction::kTakeOver, pb::STAND_BY_TAKE_OVER},
    {SpareAction::kLeave, pb::STAND_BY_LEAVE},
};

}  // namespace

pb::LostAction ToProto(LostAction in) {
  for (const auto& [a, b] : kLostActions) {
    if (a == in) return b;
  }
  return pb::LOST_ACTION_STOP;
}

LostAction FromProto(pb::LostAction in) {
  for (const auto& [a, b] : kLostActions) {
    if (b == in) return a;
  }
  return LostAction::kStop;
}

void ToProto(const LostDecision& in, pb::ReportLostReply* out) {
  out->set_description(in.description);
  out->set_action(ToProto(in.action));
  out->set_retired(in.retired);
}

LostDecision FromProto(const pb::ReportLostReply& in) {
  LostDecision d;
  d.description = in.description();
  d.action = FromProto(in.action());
  d.retired = in.retired();
  return d;
}

void ToProto(const SpareReport& in, pb::StandByRequest* out) {
  out->set_node_rank(in.node_rank);
  out->set_local_world_size(in.local_world_size);
  out->set_host(in.host);
  out->set_pid(in.pid);
  out->set_nonce(in.nonce);
}

void ToProto(int node_rank, const std::vector<LiveWorker>& in, pb::FencesRequest* out) {
  out->set_node_rank(node_rank);
  for (const LiveWorker& w : in) {
    pb::LiveWorker* p = out->add_workers();
    p->set_local_rank(w.local_rank);
    p->set_pid(w.pid);
  }
}

std::vector<LiveWorker> FromProto(const pb::FencesRequest& in) {
  std::vector<LiveWorker> out;
  for (const pb::LiveWorker& w : in.workers()) out.push_back({w.local_rank(), w.pid()});
  return out;
}

void ToProto(const std::vector<FenceOrder>& in, pb::FencesReply* out) {
  for (const FenceOrder& f : in) {
    pb::FenceOrder* p = out->add_fences();
    p->set_local_rank(f.local_rank);
    p->set_pid(f.pid);
    p->set_reason(f.reason);
  }
}

std::vector<FenceOrder> FromProto(const pb::FencesReply& in) {
  std::vector<FenceOrder> out;
  for (const pb::FenceOrder& f : in.fences()) out.push_back({f.local_rank(), f.pid(), f.reason()});
  return out;
}

SpareReport FromProto(const pb::StandByRequest& in) {
  SpareReport r;
  r.node_rank = in.node_rank();
  r.local_world_size = in.local_world_size();
  r.host = in.host();
  r.pid = in.pid();
  r.nonce = in.nonce();
  return r;
}

void ToProto(const SpareDecision& in, pb::StandByReply* out) {
  pb::StandByAction action = pb::STAND_BY_WAIT;
  for (const auto& [a, b] : kSpareActions) {
    if (a == in.action) action = b;
  }
  out->set_action(action);
  out->set_node_rank(in.node_rank);
  out->set_description(in.description);
}

SpareDecision FromProto(const pb::StandByReply& in) {
  SpareDecision d;
  for (const auto& [a, b] : kSpareActions) {
    if (b == in.action()) d.action = a;
  }
  d.node_rank = in.node_rank();
  d.description = in.description();
  return d;
}

void ToProto(const RejoinRequest& in, pb::RejoinRequest* out) {
  out->set_membership_generation(in.membership_generation);
  out->set_committed_step(in.committed_step);
  out->set_reason(in.reason);
}

RejoinRequest FromProto(const pb::RejoinRequest& in) {
  RejoinRequest r;
  r.membership_generation = in.membership_generation();
  r.committed_step = in.committed_step();
  r.reason = in.reason();
  return r;
}

void RecoveryToProto(const RankAssignment& in, pb::RegisterReply* out) {
  out->set_membership_generation(in.membership_generation);
  out->set_store_prefix(in.store_prefix);
  out->set_state_from_peers(in.state_from_peers);
  out->set_restarts(in.restarts);
  if (!in.recovery_cause.empty()) ToProto(in.recovery_cause, out->mutable_recovery_cause());
  out->set_recovery_seconds(in.recovery_seconds);
  out->set_heartbeat_interval_ms(absl::ToInt64Milliseconds(in.heartbeat_interval));
}

void RecoveryFromProto(const pb::RegisterReply& in, RankAssignment* out) {
  out->membership_generation = in.membership_generation();
  out->store_prefix = in.store_prefix();
  out->state_from_peers = in.state_from_peers();
  out->restarts = in.restarts();
  if (in.has_recovery_cause()) out->recovery_cause = FromProto(in.recovery_cause());
  out->recovery_seconds = in.recovery_seconds();
  out->heartbeat_interval = in.heartbeat_interval_ms() > 0
                                ? absl::Milliseconds(in.heartbeat_interval_ms())
                                : absl::Seconds(1);
}

static_assert(static_cast<int>(JournalCondition::kNone) == pb::JournalHealth::NONE &&
              static_cast<int>(JournalCondition::kOk) == pb::JournalHealth::OK &&
              static_cast<int>(JournalCondition::kStuck) == pb::JournalHealth::STUCK &&
              static_cast<int>(JournalCondition::kFailed) == pb::JournalHealth::FAILED);

void RecoveryToProto(const JobStatus& in, pb::JobStatus* out) {
  out->set_restarts(in.restarts);
  out->set_max_restarts(in.max_restarts);
  out->set_last_recovery_seconds(in.last_recovery_seconds);
  out->set_membership_generation(in.membership_generation);
  out->set_spare_nodes(in.spare_nodes);
  if (in.journal.state != JournalCondition::kNone) {
    pb::JournalHealth* j = out->mutable_journal();
    j->set_state(static_cast<pb::JournalHealth::State>(in.journal.state));
    j->set_error(in.journal.error);
    j->set_records(in.journal.records);
    j->set_pending(in.journal.pending);
    j->set_dropped(in.journal.dropped);
    j->set_stuck_seconds(in.journal.stuck_seconds);
  }
  pb::CoordinatorInfo* c = out->mutable_coordinator();
  c->set_epoch(in.coordinator.epoch);
  c->set_node(in.coordinator.node);
  c->set_host(in.coordinator.host);
  if (in.coordinator.has_standby()) {
    pb::CoordinatorInfo::Standby* sb = c->mutable_standby();
    sb->set_node(in.coordinator.standby_node);
    sb->set_host(in.coordinator.standby_host);
    sb->set_behind_records(in.coordinator.standby_behind_records);
  }
  for (const LostRank& l : in.lost_ranks) {
    pb::LostRank* p = out->add_lost_ranks();
    ToProto(l.cause, p->mutable_cause());
    p->set_at_seconds(l.at_seconds);
    p->set_replaced(l.replaced);
  }
}

void RecoveryFromProto(const pb::JobStatus& in, JobStatus* out) {
  out->restarts = in.restarts();
  out->max_restarts = in.max_restarts();
  out->last_recovery_seconds = in.last_recovery_seconds();
  out->membership_generation = in.membership_generation();
  out->spare_nodes = in.spare_nodes();
  if (in.has_journal()) {
    const pb::JournalHealth& j = in.journal();
    const int state = j.state();
    out->journal.state = state >= 0 && state <= static_cast<int>(JournalCondition::kFailed)
                             ? static_cast<JournalCondition>(state)
                             : JournalCondition::kFailed;
    out->journal.error = j.error();
    out->journal.records = j.records();
    out->journal.pending = j.pending();
    out->journal.dropped = j.dropped();
    out->journal.stuck_seconds = j.stuck_seconds();
  }
  if (in.has_coordinator()) {
    const pb::CoordinatorInfo& c = in.coordinator();
    out->coordinator.epoch = c.epoch();
    out->coordinator.node = c.node();
    out->coordinator.host = c.host();
    if (c.has_standby()) {
      out->coordinator.standby_node = c.standby().node();
      out->coordinator.standby_host = c.standby().host();
      out->coordinator.standby_behind_records = c.standby().behind_records();
    }
  }
  out->lost_ranks.reserve(static_cast<size_t>(in.lost_ranks_size()));
  for (const pb::LostRank& p : in.lost_ranks()) {
    LostRank& l = out->lost_ranks.emplace_back();
    l.cause = FromProto(p.cause());
    l.at_seconds = p.at_seconds();
    l.replaced = p.replaced();
  }
}

}  // namespace ddp
