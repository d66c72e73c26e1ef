#include "coordinator/ops/job_metrics.h"

#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "coordinator/ops/prometheus_text.h"

namespace ddp {

RankMetricLines RankMetricsOf(const RankStatus& r) {
  RankMetricLines lines;
  if (r.rank < 0) return lines;
  if (r.phase != StepPhase::kNone) {
    absl::StrAppend(&lines.phase, "ddp_rank_phase_seconds{rank=\"", r.rank, "\",phase=\"",
                    StepPhaseName(r.phase), "\"} ", PromValue(r.phase_seconds), "\n");
  }
  const std::string labels =
      absl::StrCat("{rank=\"", r.rank, "\",host=\"", PromLabel(r.host), "\"} ");
  absl::StrAppend(&lines.step, "ddp_rank_step", labels, r.step, "\n");
  absl::StrAppend(&lines.seen, "ddp_rank_last_seen_seconds", labels);
  if (r.score.measured) {
    const std::string rank = absl::StrCat("{rank=\"", r.rank, "\"");
    absl::StrAppend(&lines.score, "ddp_rank_score", rank, ",section=\"step\"} ",
                    PromValue(r.score.relative), "\n");
    for (StepSection k : kAllStepSections) {
      absl::StrAppend(&lines.score, "ddp_rank_score", rank, ",section=\"", StepSectionName(k),
                      "\"} ", PromValue(r.score.sections[static_cast<int>(k)]), "\n");
    }
    absl::StrAppend(&lines.individual, "ddp_rank_individual_score", rank, "} ",
                    PromValue(r.score.individual), "\n", "ddp_rank_straggler", rank, "} ",
                    r.score.straggler ? 1 : 0, "\n");
  }
  return lines;
}

void RenderRankMetrics(size_t ranks, absl::FunctionRef<const RankMetricLines&(size_t)> lines,
                       absl::FunctionRef<double(size_t)> last_seen, std::string* out) {
  AppendPromHeader(out, "ddp_rank_phase_seconds", "gauge",
                   "Seconds each rank has been in its step phase, labelled with the phase");
  for (size_t i = 0; i < ranks; ++i) out->append(lines(i).phase);
  AppendPromHeader(out, "ddp_rank_step", "gauge", "Global step reported by each rank");
  for (size_t i = 0; i < ranks; ++i) out->append(lines(i).step);
  AppendPromHeader(out, "ddp_rank_last_seen_seconds", "gauge",
                   "Seconds since each rank's last heartbeat");
  for (size_t i = 0; i < ranks; ++i) {
    const RankMetricLines& l = lines(i);
    if (l.seen.empty()) continue;
    absl::StrAppend(out, l.seen, PromValue(last_seen(i)), "\n");
  }
  AppendPromHeader(out, "ddp_rank_score", "gauge",
                   "The best rank's time per step over this rank's, by section (step: busy time, "
                   "the step less communication); 1 is the best, under --straggler-threshold slow");
  for (size_t i = 0; i < ranks; ++i) out->append(lines(i).score);
  AppendPromHeader(out, "ddp_rank_individual_score", "gauge",
                   "Each rank's own best busy time per step over its current one");
  AppendPromHeader(out, "ddp_rank_straggler", "gauge", "1 for a rank named a straggler");
  for (size_t i = 0; i < ranks; ++i) out->append(lines(i).individual);
}

void RenderJobGauges(const JobStatus& s, std::string* out) {
  AppendPromHeader(out, "ddp_job_info", "gauge", "Constant 1, labelled with the job's identity");
  absl::StrAppend(out, "ddp_job_info{job_id=\"", PromLabel(s.job_id), "\",generation=\"",
                  s.generation, "\"} 1\n");
  AppendPromHeader(out, "ddp_job_state", "gauge",
                   "1 for the job's current state, 0 for the others");
  for (JobState st : kAllJobStates) {
    absl::StrAppend(out, "ddp_job_state{state=\"", JobStateName(st), "\"} ", s.state == st ? 1 : 0,
                    "\n");
  }
  int lost = 0;
  int failed = 0;
  std::vector<std::pair<RankState, int>> by_state;  // in kAllRankStates order, present ones only
  for (RankState st : kAllRankStates) {
    int n = 0;
    for (const RankStatus& r : s.ranks) n += r.state == st ? 1 : 0;
    if (n > 0) by_state.emplace_back(st, n);
    if (st == RankState::kLost) lost = n;
    if (st == RankState::kFailed) failed = n;
  }
  AppendPromGauge(out, "ddp_job_finished", "1 once the job reached a terminal state",
                  s.finished ? 1 : 0);
  AppendPromGauge(out, "ddp_world_size", "Ranks the job expects", s.world_size);
  AppendPromGauge(out, "ddp_registered_ranks", "Workers registered so far", s.registered);
  AppendPromGauge(out, "ddp_lost_ranks", "Ranks lost (died or went silent)", lost);
  AppendPromGauge(out, "ddp_failed_ranks", "Ranks that reported a failure", failed);
  AppendPromHeader(out, "ddp_ranks", "gauge", "Ranks by state");
  for (const auto& [state, count] : by_state) {
    absl::StrAppend(out, "ddp_ranks{state=\"", RankStateName(state), "\"} ", count, "\n");
  }
  AppendPromGauge(out, "ddp_epoch", "Current epoch (highest over ranks)",
                  static_cast<double>(s.epoch));
  AppendPromGauge(out, "ddp_epochs", "Epochs to train", static_cast<double>(s.epochs));
  AppendPromGauge(out, "ddp_step", "Global step of the slowest rank", static_cast<double>(s.step));
  AppendPromGauge(out, "ddp_steps_per_epoch", "Steps per epoch",
                  static_cast<double>(s.steps_per_epoch));
  AppendPromGauge(out, "ddp_loss", "Mean recent training loss over ranks", s.loss);
  AppendPromGauge(out, "ddp_samples_per_second", "Training throughput summed over ranks",
                  s.samples_per_second);
  AppendPromGauge(out, "ddp_eta_seconds", "Estimated seconds to the end (-1 unknown)",
                  s.eta_seconds);
  AppendPromGauge(out, "ddp_uptime_seconds", "Seconds since the coordinator started",
                  s.uptime_seconds);
  AppendPromGauge(out, "ddp_checkpoint_step", "Step of the last committed checkpoint (-1 none)",
                  s.checkpoint_epoch >= 0 ? static_cast<double>(s.checkpoint_step) : -1.0);
  // In-job recovery: a counter of restarts used (it only grows over the job's life).
  AppendPromHeader(out, "ddp_restarts_total", "counter",
                   "Workers replaced in place (in-job recovery) since the job started");
  absl::StrAppend(out, "ddp_restarts_total ", s.restarts, "\n");
  AppendPromGauge(out, "ddp_max_restarts", "Restarts the job may use (--max-restarts)",
                  s.max_restarts);
  AppendPromGauge(out, "ddp_last_recovery_seconds",
                  "Seconds from the last loss to its new membership generation (-1 none)",
                  s.last_recovery_seconds);
  AppendPromGauge(out, "ddp_membership_generation", "The coordinator's rank-table generation",
                  static_cast<double>(s.membership_generation));
  AppendPromGauge(out, "ddp_spare_nodes", "Spare nodes standing by (--spare-nodes)", s.spare_nodes);
  // The standby coordinator: the epoch is also the count of takeovers (it only grows).
  AppendPromGauge(out, "ddp_coordinator_epoch",
                  "Epoch of the coordinator serving the job (0: task 0's; +1 per takeover)",
                  static_cast<double>(s.coordinator.epoch));
  AppendPromHeader(out, "ddp_coordinator_takeovers_total", "counter",
                   "Takeovers of the job by a standby coordinator");
  absl::StrAppend(out, "ddp_coordinator_takeovers_total ", s.coordinator.takeovers(), "\n");
  if (s.coordinator.has_standby()) {
    AppendPromGauge(out, "ddp_standby_behind_records",
                    "Journal records a standby taking over now would miss (not yet in the file)",
                    static_cast<double>(s.coordinator.standby_behind_records));
  }
  AppendPromGauge(out, "ddp_stalled_rank",
                  "The rank stalled longest (stuck in a working phase while peers wait; -1 none)",
                  s.stall.present() ? s.stall.rank : -1);
  AppendPromGauge(out, "ddp_stragglers", "Ranks named stragglers",
                  static_cast<double>(s.stragglers.size()));
  if (s.breakdown.measured()) {
    AppendPromHeader(out, "ddp_step_section_seconds", "gauge",
                     "The slowest rank's seconds per step in each section");
    for (StepSection k : kAllStepSections) {
      absl::StrAppend(out, "ddp_step_section_seconds{section=\"", StepSectionName(k), "\"} ",
                      PromValue(s.breakdown.seconds[static_cast<int>(k)]), "\n");
    }
    AppendPromHeader(out, "ddp_step_section_spread_seconds", "gauge",
                     "Each section's seconds per step, largest rank less smallest");
    for (StepSection k : kAllStepSections) {
      absl::StrAppend(out, "ddp_step_section_spread_seconds{section=\"", StepSectionName(k), "\"} ",
                      PromValue(s.breakdown.spread[static_cast<int>(k)]), "\n");
    }
  }
  AppendPromGauge(out, "ddp_ettr",
                  "Effective training time ratio: training over wall time since the start (-1 "
                  "before any)",
                  s.time_use.ettr());
  // Cumulative over the coordinator's life (it only grows): a counter, so rate() reads the share
  // of recent wall time each use took.
  AppendPromHeader(out, "ddp_time_seconds", "counter",
                   "Wall time since the job's start by what it went to (use: training, startup, "
                   "recoveries, stalls, checkpoints, evaluation, other)");
  const std::pair<const char*, double> uses[] = {{"training", s.time_use.training},
                                                 {"startup", s.time_use.startup},
                                                 {"recoveries", s.time_use.recovery},
                                                 {"stalls", s.time_use.stall},
                                                 {"checkpoints", s.time_use.checkpoint},
                                                 {"evaluation", s.time_use.evaluation},
                                                 {"other", s.time_use.other}};
  for (const auto& [use, seconds] : uses) {
    absl::StrAppend(out, "ddp_time_seconds{use=\"", use, "\"} ", PromValue(seconds), "\n");
  }
  AppendPromGauge(out, "ddp_stall_seconds",
                  "Seconds the stalled rank has been in its phase (0 none)",
                  s.stall.present() ? s.stall.seconds : 0.0);
}

void RenderJobMetrics(const JobStatus& s, std::string* out) {
  RenderJobGauges(s, out);
  std::vector<RankMetricLines> lines;
  lines.reserve(s.ranks.size());
  for (const RankStatus& r : s.ranks) lines.push_back(RankMetricsOf(r));
  RenderRankMetrics(
      s.ranks.size(), [&lines](size_t i) -> const RankMetricLines& { return lines[i]; },
      [&s](size_t i) { return s.ranks[i].last_seen_seconds; }, out);
}

}  // namespace ddp
