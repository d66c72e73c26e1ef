// The job's result file, `<dist_file>.result`: how a job ended, written by its coordinator once
// the job has ended (atomically, mode 0600), for scripts (slurm/lib/ddp.sh ddp_job_outcome),
// `ddpctl ls`, and a spare node's task that outlived the coordinator. Lines:
//
//   job_id=<id>
//   generation=<Slurm restart count>
//   state=SUCCEEDED|STOPPED|FAILED
//   exit_code=<the job's exit code>
//
// Thread safety: pure functions; safe from any thread.
#ifndef SLURM_DDP_COMMON_JOB_RESULT_H_
#define SLURM_DDP_COMMON_JOB_RESULT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace ddp {

struct JobResult {
  std::string job_id;
  int64_t generation = -1;  // -1: not given
  std::string state;        // SUCCEEDED, STOPPED or FAILED
  int exit_code = -1;       // -1: not given
};

// "<dist_file>.result".
std::string JobResultPath(const std::string& dist_file);

// The file's text for `r` (the job id with its control characters escaped by the caller).
std::string FormatJobResult(const JobResult& r);

// Reads a result file: NOT_FOUND when there is none; an error when it is not a private regular
// file of this user (ReadPrivateFile), is over 4 KiB, or names no outcome.
absl::StatusOr<JobResult> ReadJobResult(const std::string& path);

}  // namespace ddp

#endif  // SLURM_DDP_COMMON_JOB_RESULT_H_
