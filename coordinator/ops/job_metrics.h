// The job and per-rank gauges of /metrics, rendered from one JobStatus (rebuilt with each status
// snapshot, not per scrape): ddp_job_info, ddp_job_state{state}, ddp_job_finished,
// ddp_world_size, ddp_registered_ranks, ddp_lost_ranks, ddp_failed_ranks, ddp_ranks{state},
// ddp_epoch, ddp_epochs, ddp_step, ddp_steps_per_epoch, ddp_loss, ddp_samples_per_second,
// ddp_eta_seconds, ddp_uptime_seconds, ddp_checkpoint_step, ddp_rank_step{rank,host},
// ddp_rank_last_seen_seconds{rank,host}; straggler detection: ddp_rank_score{rank,section}
// (section data, compute, communication, optimizer, and step for the relative score of the
// busy time), ddp_rank_individual_score{rank}, ddp_rank_straggler{rank}, ddp_stragglers; where
// the time goes: ddp_step_section_seconds{section}, ddp_step_section_spread_seconds{section},
// ddp_ettr, ddp_time_seconds{use} (a counter). State labels are the enums' names
// (common/job_status.h; a stopped job is STOPPED here).
//
// Thread safety: a pure function.
#ifndef SLURM_DDP_COORDINATOR_OPS_JOB_METRICS_H_
#define SLURM_DDP_COORDINATOR_OPS_JOB_METRICS_H_

#include <cstddef>
#include <string>

#include "absl/functional/function_ref.h"
#include "common/job_status.h"

namespace ddp {

// Appends the job and per-rank gauges for `status` in Prometheus text format.
void RenderJobMetrics(const JobStatus& status, std::string* out);

// RenderJobMetrics in parts, for a snapshot built incrementally (status_render.h): the job-wide
// families, then the per-rank ones from each rank's lines. The same text as RenderJobMetrics.
//
// One rank's lines: its ddp_rank_phase_seconds and ddp_rank_step lines (empty when the rank has
// none), and its ddp_rank_last_seen_seconds line up to the value (empty for an unranked worker).
struct RankMetricLines {
  std::string phase;
  std::string step;
  std::string seen;
  std::string score;       // its ddp_rank_score lines (empty until scored)
  std::string individual;  // its ddp_rank_individual_score and ddp_rank_straggler lines
};
RankMetricLines RankMetricsOf(const RankStatus& rank);
void RenderJobGauges(const JobStatus& status, std::string* out);
void RenderRankMetrics(size_t ranks, absl::FunctionRef<const RankMetricLines&(size_t)> lines,
                       absl::FunctionRef<double(size_t)> last_seen, std::string* out);

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_OPS_JOB_METRICS_H_
