// Checkpoints: files that Python's torch.load opens (torch::pickle_save's zip format), holding
//   {"format": "slurm-ddp-checkpoint-v1",
//    "model": {name: tensor} (state_dict order), "optimizer": {"momentum_buffer": {name: tensor},
//    "lr", "momentum", "weight_decay", "nesterov"}, "schedule": {"name", "base_lr", ...},
//    "epoch", "step", "sampler": {"epoch", "consumed", "world_size", "seed"}, "rng": tensor}
// Written atomically (temp file, fsync, rename, directory fsync) as
// <dir>/ckpt-<step>.pt; the newest `keep` are kept; a finished run writes <dir>/final.pt.
//
// Thread safety: free functions; concurrent writers to one directory are not supported (rank 0
// writes).
#ifndef SLURM_DDP_TRAINER_APP_CHECKPOINT_H_
#define SLURM_DDP_TRAINER_APP_CHECKPOINT_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/models/model.h"

namespace ddp {

struct CheckpointState {
  std::vector<models::NamedTensor> model;     // state_dict
  std::vector<models::NamedTensor> momentum;  // SGD momentum buffers by parameter name
  double lr = 0;
  double base_lr = 0;
  double momentum_factor = 0;
  double weight_decay = 0;
  bool nesterov = false;
  std::string schedule;
  int64_t epoch = 0;                // epoch in progress (== epochs when training finished)
  int64_t step = 0;                 // global optimizer steps taken
  int64_t consumed = 0;             // global sample positions of `epoch` consumed
  int64_t consumed_world_size = 1;  // world size that consumed them
  int64_t seed = 0;
  at::Tensor rng;  // CPU generator state
};

// Fails before training if `dir` cannot be created or written (one-line error).
absl::Status CheckCheckpointDirWritable(const std::string& dir);

absl::Status WriteCheckpoint(const std::string& path, const CheckpointState& state);
absl::StatusOr<CheckpointState> ReadCheckpoint(const std::string& path);

// Path of the periodic checkpoint for `step`.
std::string CheckpointPath(const std::string& dir, int64_t step);

// The newest periodic checkpoint in `dir` that loads and verifies (or NOT_FOUND). Corrupt ones
// are skipped, each with a warning line appended to `warnings`.
absl::StatusOr<std::string> FindResumableCheckpoint(const std::string& dir,
                                                    std::vector<std::string>* warnings);

// Deletes all but the newest `keep` periodic checkpoints.
void PruneCheckpoints(const std::string& dir, int keep);

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_APP_CHECKPOINT_H_
