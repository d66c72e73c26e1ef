// The job's result file, `<dist_file>.result`: how a job ended, written by its coordinator once
// the job has ended (atomically, mode 0600), for scripts (slurm/lib/ddp.sh ddp_job_outcome),
// `ddpctl ls`, and a spare node's task that outlived the coordinator. Lines:
//
//   job_id=<id>
//   generation=<Slurm restart count>
//   state=SUCCEEDED|STOPPED|FAILED
//   exit_code=<the job's exit code>
//   epoch=<the coordinator epoch that wrote it: 0, or later after a standby took the job over>
//
// It is written after the coordinator stopped serving and before it removes the dist_file, so a
// coordinator of an older epoch that comes back after the job ended (its node was stopped) finds
// it and stops (coordinator/epoch_lease.h). A reader ignores lines it does not know; a file
// without `epoch` (an older writer) reads as epoch -1.
//
// Thread safety: pure functions; safe from any thread.
#ifndef SLURM_DDP_COMMON_JOB_RESULT_H_
#define SLURM_DDP_COMMON_JOB_RESULT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace ddp {

struct JobResult {
  std::string job_id;
  int64_t generation = -1;  // -1: not given
  std::string state;        // SUCCEEDED, STOPPED or FAILED
  int exit_code = -1;       // -1: not given
  int64_t epoch = -1;       // -1: not given
};

// "<dist_file>.result".
std::string JobResultPath(const std::string& dist_file);

// The file's text for `r` (the job id with its control characters escaped by the caller).
std::string FormatJobResult(const JobResult& r);

// Reads a result file: NOT_FOUND when there is none; an error when it is not a private regular
// file of this user (ReadPrivateFile), is over 4 KiB, or names no outcome.
absl::StatusOr<JobResult> ReadJobResult(const std::string& path);

// The result beside `dist_file` when it is job `job_id`'s, generation `generation`'s: nullopt
// while there is none, or it is another job's or generation's (an earlier run at the path), or it
// cannot be read.
std::optional<JobResult> ReadJobResultOf(const std::string& dist_file, const std::string& job_id,
                                         int64_t generation);

}  // namespace ddp

#endif  // SLURM_DDP_COMMON_JOB_RESULT_H_
