// Bounded time series of the job for the dashboard's charts (/api/history): step, loss,
// throughput and where the wall time went so far (the status's time_use, cumulative seconds by
// use) sampled from status snapshots. Memory stays bounded however long the job runs:
// when `capacity` samples are held, every other one is dropped and the sampling interval doubles,
// so the series always spans the whole run at a coarser resolution.
//
// Thread safety: every method is thread-safe.
#ifndef SLURM_DDP_COORDINATOR_OPS_HISTORY_H_
#define SLURM_DDP_COORDINATOR_OPS_HISTORY_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/job_status.h"

namespace ddp {

class History {
 public:
  struct Sample {
    double t = 0;  // job uptime, seconds
    int64_t step = 0;
    int64_t epoch = 0;
    double loss = 0;
    double samples_per_second = 0;
    TimeUse time_use;  // cumulative since the job's start
  };

  // `capacity` >= 4; `interval_seconds` > 0: the finest spacing of samples.
  History(size_t capacity, double interval_seconds);

  // Records `status` if at least the current interval passed since the last sample (or the job
  // just finished). Skips jobs without progress yet (registering, or no rank reported).
  void Add(const JobStatus& status);
  std::vector<Sample> Samples() const;
  // {"interval_seconds":..,"t":[..],"step":[..],"epoch":[..],"loss":[..],
  //  "samples_per_second":[..],"time_use":{"wall":[..],"training":[..],"startup":[..],
  //  "recoveries":[..],"stalls":[..],"checkpoints":[..],"evaluation":[..],"other":[..]}}
  // (time_use: cumulative seconds by use at each sample, the status JSON's words).
  std::string ToJson() const;

 private:
  const size_t capacity_;
  mutable absl::Mutex mu_;
  double interval_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Sample> samples_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_OPS_HISTORY_H_
