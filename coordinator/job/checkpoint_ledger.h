// The checkpoints rank 0 has durably written in this generation: the latest one (for status and
// for the resume position of its epoch). Checkpoints only move forward.
//
// Thread safety: none; the owner (Job) calls it under its lock.
#ifndef SLURM_DDP_COORDINATOR_JOB_CHECKPOINT_LEDGER_H_
#define SLURM_DDP_COORDINATOR_JOB_CHECKPOINT_LEDGER_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "common/coordinator_api.h"

namespace ddp {

class CheckpointLedger {
 public:
  // Records `checkpoint`; INVALID_ARGUMENT (and nothing changes) when it is older, by (epoch,
  // step), than the latest one.
  absl::Status Commit(const CommittedCheckpoint& checkpoint);
  // The latest committed checkpoint, or nullptr.
  const CommittedCheckpoint* latest() const { return latest_ ? &*latest_ : nullptr; }
  // Positions of `epoch` consumed at the latest checkpoint, when that checkpoint is of `epoch`.
  std::optional<int64_t> ConsumedIn(int64_t epoch) const;

 private:
  std::optional<CommittedCheckpoint> latest_;
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_CHECKPOINT_LEDGER_H_
