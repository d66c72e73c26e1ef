// The job's own pace: the median time one training step takes, learned from the global step each
// rank reports. The stall rule (stall_rule.h) derives its default budget from it.
//
// A sample is the time between two observations of a rank's step divided by the steps between
// them (heartbeats come about once a second, so one sample may cover many fast steps or one slow
// one). The owner observes a rank only once it reports training progress, after its first step
// (model build, first allreduce, cuDNN autotune), which says nothing about the pace. The median
// is over the last kWindow samples of all ranks.
//
// Thread safety: none; the owner (Job) calls it under its lock.
#ifndef SLURM_DDP_COORDINATOR_JOB_STEP_PACE_H_
#define SLURM_DDP_COORDINATOR_JOB_STEP_PACE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/time/time.h"

namespace ddp {

class StepPace {
 public:
  static constexpr size_t kWindow = 64;

  explicit StepPace(int num_ranks);

  // `rank` reports global step `step` at `now`. A step lower than the last one seen (a rank
  // brought back to an earlier committed step) restarts the rank's count without a sample.
  void Observe(int rank, int64_t step, absl::Time now);
  // Forgets `rank` (a replacement process took its place): its next observation starts afresh.
  void Reset(int rank);
  // The median step time over the window; nullopt before the first sample.
  std::optional<absl::Duration> median() const;

 private:
  struct Rank {
    bool seen = false;
    int64_t step = 0;
    absl::Time at;
  };
  std::vector<Rank> ranks_;
  std::vector<absl::Duration> window_;  // ring buffer of samples
  size_t next_ = 0;
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_STEP_PACE_H_
