// Status types shared by the coordinator, its HTTP endpoint and ddpctl, and their JSON form
// (the `ddpctl status --json` contract in DESIGN.md: one object with job_id, state, world_size,
// registered, epoch, epochs, step, steps_per_epoch, loss, samples_per_second and a `ranks` list of
// {rank, host, local_rank, state, step, last_seen_seconds}; extended, never renamed).
//
// Thread safety: plain values and pure functions; safe from any thread.
#ifndef SLURM_DDP_COMMON_JOB_STATUS_H_
#define SLURM_DDP_COMMON_JOB_STATUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace ddp {

// A graceful stop ends in STOPPING with `finished` set (the job exits "stopped for requeue").
enum class JobState { kRegistering, kRunning, kStopping, kSucceeded, kFailed };

// "REGISTERING", "RUNNING", ...
const char* JobStateName(JobState state);
bool IsTerminal(JobState state, bool finished);

struct RankStatus {
  int rank = 0;
  std::string host;
  int node_rank = 0;
  int local_rank = 0;
  int pid = 0;
  std::string state;  // "starting", "training", ..., "done", "failed", "lost"
  int64_t epoch = 0;
  int64_t step = 0;
  double loss = 0.0;
  double samples_per_second = 0.0;
  double last_seen_seconds = 0.0;  // since the last heartbeat (or registration)
};

struct JobStatus {
  std::string job_id;
  JobState state = JobState::kRegistering;
  bool finished = false;  // terminal: SUCCEEDED, FAILED, or STOPPING after every rank stopped
  int64_t generation = 0;
  int world_size = 0;
  int registered = 0;
  int num_nodes = 0;
  int64_t epoch = 0;
  int64_t epochs = 0;
  int64_t step = 0;  // the slowest live rank's global step
  int64_t steps_per_epoch = 0;
  double loss = 0.0;                // mean over ranks' recent loss
  double samples_per_second = 0.0;  // summed over ranks
  double eta_seconds = -1.0;        // -1 when unknown
  double uptime_seconds = 0.0;
  int failed_rank = -1;  // -1 when none
  std::string failure_reason;
  int64_t checkpoint_epoch = -1;  // last committed checkpoint (-1 when none)
  int64_t checkpoint_step = 0;
  std::string checkpoint_path;
  std::vector<RankStatus> ranks;
  std::vector<std::string> events;  // recent state changes, oldest first ("+12.3s what")
};

// Lagging ranks, the rule `ddpctl status` and the dashboard share (the page mirrors it in JS):
// a rank still working (not done, stopped, failed or lost) is BEHIND when its step trails the
// median step of the working ranks by more than max(2, median / 100) (ranks heartbeat at
// different moments, so a small gap is normal), and SILENT when its last heartbeat is older
// than two heartbeat periods.
inline constexpr double kHeartbeatPeriodSeconds = 1.0;
struct RankFlags {
  int64_t behind_by = 0;  // steps behind the median; 0 when not lagging
  bool silent = false;
  bool lagging() const { return behind_by > 0 || silent; }
};
// True for "done", "stopped", "failed", "lost": the rank no longer works.
bool RankFinished(const RankStatus& rank);
// Median step over ranks still working (0 when none).
int64_t MedianStep(const JobStatus& status);
RankFlags FlagRank(const RankStatus& rank, int64_t median_step);

// JSON string literal (with quotes) for `s`: escapes quotes, backslashes and control characters;
// valid UTF-8 passes through, and each byte that is not valid UTF-8 becomes U+FFFD, so the
// result is always valid JSON whatever the bytes.
std::string JsonQuote(absl::string_view s);

// One JSON object, on one line.
std::string ToJson(const JobStatus& status);

}  // namespace ddp

#endif  // SLURM_DDP_COMMON_JOB_STATUS_H_
