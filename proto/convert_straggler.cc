// The straggler part of proto/convert.h: a heartbeat's section totals, a rank's score, and the
// job's stragglers, step breakdown and time use.
#include "proto/convert.h"

namespace ddp {

namespace pb = ::slurm_ddp::v1;

namespace {

pb::StepSection ToProto(StepSection in) {
  switch (in) {
    case StepSection::kData:
      return pb::SECTION_DATA;
    case StepSection::kCompute:
      return pb::SECTION_COMPUTE;
    case StepSection::kCommunication:
      return pb::SECTION_COMMUNICATION;
    case StepSection::kOptimizer:
      return pb::SECTION_OPTIMIZER;
  }
  return pb::SECTION_COMPUTE;
}

// A section this build does not know reads compute.
StepSection FromProto(pb::StepSection in) {
  for (StepSection s : kAllStepSections) {
    if (ToProto(s) == in) return s;
  }
  return StepSection::kCompute;
}

int Index(StepSection s) { return static_cast<int>(s); }

}  // namespace

void StragglerToProto(const SectionTotals& in, pb::Progress* out) {
  out->set_section_steps(in.steps);
  out->set_data_seconds(in.seconds[Index(StepSection::kData)]);
  out->set_compute_seconds(in.seconds[Index(StepSection::kCompute)]);
  out->set_communication_seconds(in.seconds[Index(StepSection::kCommunication)]);
  out->set_optimizer_seconds(in.seconds[Index(StepSection::kOptimizer)]);
}

void StragglerFromProto(const pb::Progress& in, SectionTotals* out) {
  out->steps = in.section_steps();
  out->seconds[Index(StepSection::kData)] = in.data_seconds();
  out->seconds[Index(StepSection::kCompute)] = in.compute_seconds();
  out->seconds[Index(StepSection::kCommunication)] = in.communication_seconds();
  out->seconds[Index(StepSection::kOptimizer)] = in.optimizer_seconds();
}

void StragglerToProto(const RankScore& in, pb::RankStatus* out) {
  if (!in.measured) return;
  pb::RankScore* s = out->mutable_score();
  s->set_relative(in.relative);
  s->set_individual(in.individual);
  s->set_data(in.sections[Index(StepSection::kData)]);
  s->set_compute(in.sections[Index(StepSection::kCompute)]);
  s->set_communication(in.sections[Index(StepSection::kCommunication)]);
  s->set_optimizer(in.sections[Index(StepSection::kOptimizer)]);
  s->set_straggler(in.straggler);
}

void StragglerFromProto(const pb::RankStatus& in, RankScore* out) {
  *out = RankScore();
  if (!in.has_score()) return;
  const pb::RankScore& s = in.score();
  out->measured = true;
  out->relative = s.relative();
  out->individual = s.individual();
  out->sections[Index(StepSection::kData)] = s.data();
  out->sections[Index(StepSection::kCompute)] = s.compute();
  out->sections[Index(StepSection::kCommunication)] = s.communication();
  out->sections[Index(StepSection::kOptimizer)] = s.optimizer();
  out->straggler = s.straggler();
}

void StragglerToProto(const JobStatus& in, pb::JobStatus* out) {
  for (const StragglerReport& st : in.stragglers) {
    pb::Straggler* p = out->add_stragglers();
    p->set_rank(st.rank);
    p->set_host(st.host);
    p->set_node(st.node_rank);
    p->set_section(ToProto(st.section));
    p->set_relative_score(st.relative_score);
    p->set_slower(st.slower);
    p->set_since(st.since_seconds);
    p->set_seconds(st.seconds);
  }
  if (in.breakdown.measured()) {
    pb::StepBreakdown* b = out->mutable_breakdown();
    b->set_rank(in.breakdown.rank);
    for (double v : in.breakdown.seconds) b->add_seconds(v);
    for (double v : in.breakdown.spread) b->add_spread(v);
  }
  const TimeUse& t = in.time_use;
  pb::TimeUse* u = out->mutable_time_use();
  u->set_wall(t.wall);
  u->set_training(t.training);
  u->set_startup(t.startup);
  u->set_recovery(t.recovery);
  u->set_stall(t.stall);
  u->set_checkpoint(t.checkpoint);
  u->set_evaluation(t.evaluation);
  u->set_other(t.other);
}

void StragglerFromProto(const pb::JobStatus& in, JobStatus* out) {
  for (const pb::Straggler& p : in.stragglers()) {
    StragglerReport& st = out->stragglers.emplace_back();
    st.rank = p.rank();
    st.host = p.host();
    st.node_rank = p.node();
    st.section = FromProto(p.section());
    st.relative_score = p.relative_score();
    st.slower = p.slower();
    st.since_seconds = p.since();
    st.seconds = p.seconds();
  }
  if (in.has_breakdown()) {
    const pb::StepBreakdown& b = in.breakdown();
    out->breakdown.rank = b.rank();
    for (int i = 0; i < kNumStepSections; ++i) {
      out->breakdown.seconds[i] = i < b.seconds_size() ? b.seconds(i) : 0.0;
      out->breakdown.spread[i] = i < b.spread_size() ? b.spread(i) : 0.0;
    }
  }
  const pb::TimeUse& u = in.time_use();
  TimeUse& t = out->time_use;
  t.wall = u.wall();
  t.training = u.training();
  t.startup = u.startup();
  t.recovery = u.recovery();
  t.stall = u.stall();
  t.checkpoint = u.checkpoint();
  t.evaluation = u.evaluation();
  t.other = u.other();
}

}  // namespace ddp
