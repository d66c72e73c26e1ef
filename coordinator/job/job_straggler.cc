// Job's straggler watch and time account (docs/operations.md, "Stragglers" and "Where the time
// goes"): every StragglerWatch::kCheckPeriod the ranks' step section times feed the watch, a
// straggler named or cleared becomes an event (--straggler-action warn), and the time since the
// last check is charged to what the job was doing. Same class and lock as job.cc.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "coordinator/job/job.h"

namespace ddp {
namespace {

StragglerReport ReportOf(const Straggler& st, const WorkerIdentity& who, absl::Time start,
                         absl::Time now) {
  StragglerReport r;
  r.rank = st.rank;
  r.host = who.host;
  r.node_rank = who.node_rank;
  r.section = st.section;
  r.relative_score = st.relative_score;
  r.slower = st.slower;
  r.since_seconds = absl::ToDoubleSeconds(st.since - start);
  r.seconds = absl::ToDoubleSeconds(now - st.since);
  return r;
}

bool Working(RankState s) { return !IsFinal(s) && s != RankState::kFinished; }

}  // namespace

TimeUseKind Job::TimeUseLocked(absl::Time now) {
  switch (lifecycle_.state()) {
    case JobState::kRegistering:
      return TimeUseKind::kStartup;
    case JobState::kRecovering:
      return TimeUseKind::kRecovery;
    case JobState::kStopping:
      return TimeUseKind::kOther;
    case JobState::kRunning:
      break;
    default:
      return TimeUseKind::kOther;
  }
  if (!stall_watch_.stalls().empty()) return TimeUseKind::kStall;
  bool started = false, checkpoint = false, eval = false, recovery = false;
  const int n = membership_.num_ranks();
  for (int r = 0; r < n; ++r) {
    const RankSample sample = liveness_.Sample(r, now);
    if (!Working(sample.state)) continue;
    const ProgressReport& p = sample.progress;
    if (p.phase == WorkerPhase::kStarting) continue;
    started = true;
    checkpoint |= p.phase == WorkerPhase::kCheckpointing || p.step_phase == StepPhase::kCheckpoint;
    eval |= p.phase == WorkerPhase::kEvaluating || p.step_phase == StepPhase::kEval;
    recovery |= p.step_phase == StepPhase::kRecovery;
  }
  if (!started) return membership_.current() > 0 ? TimeUseKind::kRecovery : TimeUseKind::kStartup;
  if (recovery) return TimeUseKind::kRecovery;
  if (checkpoint) return TimeUseKind::kCheckpoint;
  if (eval) return TimeUseKind::kEvaluation;
  return TimeUseKind::kTraining;
}

void Job::WatchTimeLocked(absl::Time now, Completions* out) {
  if (!straggler_watch_.Due(now)) return;
  time_account_.Charge(now, TimeUseLocked(now));
  if (lifecycle_.state() == JobState::kRecovering) return;  // phases are stale meanwhile
  const int n = membership_.num_ranks();
  for (int r = 0; r < n; ++r) {
    const RankSample sample = liveness_.Sample(r, now);
    straggler_watch_.Observe(
        r, sample.progress.sections,
        Working(sample.state) && sample.progress.phase != WorkerPhase::kStarting, now);
  }
  for (const StragglerWatch::Change& c : straggler_watch_.Judge(now)) {
    const StragglerReport r =
        ReportOf(c.straggler, membership_.who(c.straggler.rank), lifecycle_.start(), now);
    if (c.appeared) {
      EventLocked(
          absl::StrCat(membership_.Describe(r.rank), " is a straggler: ", StragglerReason(r),
                       "; --straggler-action ", StragglerActionName(config_.straggler.action)),
          out);
    } else {
      EventLocked(absl::StrFormat("%s is no longer a straggler (relative score %.2f, after %.0f s)",
                                  membership_.Describe(r.rank), r.relative_score, r.seconds),
                  out);
    }
  }
  ActOnStragglersLocked(now, out);
}

void Job::ActOnStragglersLocked(absl::Time now, Completions* out) {
  const StragglerAction action = config_.straggler.action;
  if (action == StragglerAction::kWarn || FinishedLocked()) return;
  for (const Straggler& st : straggler_watch_.stragglers()) {
    if (st.rank < 0 || st.rank >= membership_.num_ranks()) continue;
    const WorkerIdentity& who = membership_.who(st.rank);
    const StragglerReport r = ReportOf(st, who, lifecycle_.start(), now);
    const std::string node = who.node_name.empty() ? who.host : who.node_name;
    const std::pair<std::string, int> key(node, static_cast<int>(st.section));
    if (straggler_acted_.count(key) > 0) continue;
    if (action == StragglerAction::kExclude) {
      straggler_acted_.insert(key);
      if (config_.exclude) {
        const NodeExclusion e{node, StepSectionName(st.section), st.relative_score, st.rank};
        out->Add([f = config_.exclude, e] { f(e); });
      }
      EventLocked(absl::StrCat("--straggler-action exclude: node ", node, " (",
                               membership_.DescribeNode(r.node_rank),
                               ") goes on the exclude list for the job's next allocation: ",
                               StepSectionName(st.section), " is slow there"),
                  out);
      continue;
    }
    if (ReplaceStragglerNodeLocked(r, now, out)) straggler_acted_.insert(key);
  }
}

bool Job::ReplaceStragglerNodeLocked(const StragglerReport& st, absl::Time now, Completions* out) {
  const int node = st.node_rank;
  const int slots = membership_.SlotsOnNode(node);
  // Not while ranks are missing: a recovery, or a registration, under way. Tried again later.
  if (lifecycle_.state() != JobState::kRunning || recovery_.in_progress() ||
      !membership_.world_complete()) {
    return false;
  }
  std::string refused;
  if (node == 0) {
    refused = "node 0 runs the coordinator and is never handed over";
  } else if (recovery_.restarts() + slots > recovery_.max_restarts()) {
    refused = absl::StrCat("its ", slots, " rank(s) would need ", slots, " restart(s) and ",
                           recovery_.max_restarts() - recovery_.restarts(), " are left");
  } else if (!spares_.CanAssign(slots, now)) {
    refused = absl::StrCat("no spare node with ", slots, " worker(s) stands by");
  }
  if (!refused.empty()) {
    const std::string line =
        absl::StrCat("--straggler-action replace: ", membership_.DescribeNode(node),
                     " is not replaced: ", refused, "; warned only");
    if (straggler_refusals_.insert(line).second) EventLocked(line, out);
    return false;
  }
  const std::string described = membership_.DescribeNode(node);
  const Spares::Spare* spare = spares_.Assign(node, slots, now);
  EventLocked(absl::StrCat("--straggler-action replace: ", described, " is handed to spare node ",
                           spare->report.node_rank, " (host ", spare->report.host, ", pid ",
                           spare->report.pid, "), in the job: ", StragglerReason(st),
                           "; its workers are fenced and its task leaves"),
              out);
  RetireNodeLocked(
      node, FailureKind::kStragglerReplaced,
      absl::StrCat(" replaced: its node is a ", StepSectionName(st.section), " straggler"),
      "its node was handed to a spare (--straggler-action replace)", out);
  return true;
}

const std::string* Job::RetiredLocked(int node, int local_rank, int pid) const {
  auto it = retired_workers_.find({node, local_rank, pid});
  return it == retired_workers_.end() ? nullptr : &it->second;
}

void Job::RetireNodeLocked(int node, FailureKind kind, const std::string& why,
                           const std::string& retired, Completions* out) {
  std::vector<int> ranks;
  for (int local = 0; local < membership_.SlotsOnNode(node); ++local) {
    const int rank = membership_.RankOf(node, local);
    if (rank < 0) continue;
    ranks.push_back(rank);
    retired_workers_[{node, local, membership_.who(rank).pid}] = retired;
  }
  for (int rank : ranks) {
    const FailureCause cause{rank, kind, absl::StrCat(membership_.Describe(rank), why)};
    if (LoseRankLocked(rank, cause, out) == LostAction::kStop) break;
  }
}

void Job::StragglerStatusLocked(absl::Time now, JobStatus* s) const {
  for (size_t i = 0; i < s->ranks.size(); ++i) {
    if (s->ranks[i].rank >= 0) s->ranks[i].score = straggler_watch_.Score(s->ranks[i].rank);
  }
  for (const Straggler& st : straggler_watch_.stragglers()) {
    if (st.rank < 0 || st.rank >= membership_.num_ranks()) continue;
    s->stragglers.push_back(ReportOf(st, membership_.who(st.rank), lifecycle_.start(), now));
  }
  std::sort(s->stragglers.begin(), s->stragglers.end(),
            [](const StragglerReport& a, const StragglerReport& b) {
              return a.relative_score < b.relative_score;
            });
  s->breakdown = straggler_watch_.breakdown();
  s->time_use = time_account_.Read(now);
}

}  // namespace ddp
