// Per-epoch shard agreement: the first rank to ask for an epoch fixes its parameters (dataset
// size, seed, shuffle, drop_last, resume position); every other rank must ask for the same, and
// each rank's epochs only go forward. Answers with the parameters from which a worker computes
// its sample order (common/sampler_plan.h), with the resume position taken from this
// generation's checkpoint of that epoch when there is one, else from the request.
//
// Thread safety: none; the owner (Job) calls it under its lock.
#ifndef SLURM_DDP_COORDINATOR_JOB_SHARD_LEDGER_H_
#define SLURM_DDP_COORDINATOR_JOB_SHARD_LEDGER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/coordinator_api.h"

namespace ddp {

class ShardLedger {
 public:
  explicit ShardLedger(int world_size);

  // `rank` in [0, world_size) (checked by the caller). `checkpoint_consumed`: positions of
  // `request.epoch` consumed at this generation's latest checkpoint, if it is of that epoch.
  // INVALID_ARGUMENT (nothing recorded) for a disagreeing rank or an epoch going backwards.
  absl::StatusOr<ShardAssignment> Assign(int rank, const ShardRequest& request,
                                         std::optional<int64_t> checkpoint_consumed);
  // A new membership generation (in-job recovery) agrees on its epochs afresh: the ranks resume
  // the epoch in progress from their synced position, which differs from the first request.
  void Reset() { agreed_.clear(); }
  // ... and in a world of another size (a job that shrank): every rank starts afresh.
  void Reset(int world_size);
  // Whether some rank fixed the parameters of `epoch` (in this generation).
  bool Agreed(int64_t epoch) const { return agreed_.count(epoch) > 0; }
  // A restarted coordinator: the agreement its journal recorded.
  void RestoreAgreed(int64_t epoch, const ShardRequest& request) { agreed_[epoch] = request; }

 private:
  int world_size_;
  std::map<int64_t, ShardRequest> agreed_;  // epoch -> the parameters every rank must send
  std::vector<int64_t> last_epoch_;         // per rank; -1 before its first request
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_SHARD_LEDGER_H_
