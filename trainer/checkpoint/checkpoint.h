// The checkpoint file format: files that Python's torch.load opens (torch::pickle_save's zip
// format), holding
//   {"format": "slurm-ddp-checkpoint-v2", "run_id": str,
//    "model": {name: tensor} (state_dict order), "optimizer": {"momentum_buffer": {name: tensor},
//    "lr", "momentum", "weight_decay", "nesterov"}, "schedule": {"name", "base_lr"},
//    "epoch", "step", "sampler": {"epoch", "consumed", "world_size", "seed", "dataset_size"},
//    "rng": tensor, "payload_crc32": int}
//
// payload_crc32 is CRC-32 (zlib's, = Python's zlib.crc32) over this byte stream, in order:
//   1. each entry of "model", then of "optimizer"."momentum_buffer", then ("rng", rng): the name's
//      bytes, a 0 byte, the number of dimensions and each dimension as little-endian int64, and
//      the tensor's bytes (contiguous, as stored);
//   2. run_id and schedule.name, each followed by a 0 byte;
//   3. little-endian int64: epoch, step, sampler.consumed, sampler.world_size, sampler.seed,
//      sampler.dataset_size;
//   4. little-endian float64: optimizer.lr, schedule.base_lr, optimizer.momentum,
//      optimizer.weight_decay; then one byte, optimizer.nesterov.
// torch.load does not check the zip's own CRCs, so a flipped byte in a tensor would load
// silently; ReadCheckpoint refuses it. Files of the first format (v1: no run_id, no checksum,
// no dataset_size) are still read, unverified.
//
// Which files exist, their names, pruning and resuming: CheckpointStore (checkpoint_store.h).
//
// Thread safety: free functions without shared state.
#ifndef SLURM_DDP_TRAINER_CHECKPOINT_CHECKPOINT_H_
#define SLURM_DDP_TRAINER_CHECKPOINT_CHECKPOINT_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/models/model.h"

namespace ddp {

inline constexpr char kCheckpointFormat[] = "slurm-ddp-checkpoint-v2";
inline constexpr char kCheckpointFormatV1[] = "slurm-ddp-checkpoint-v1";

struct CheckpointState {
  std::string run_id;                         // the run that wrote it ("" in a v1 file)
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
  int64_t dataset_size = 0;  // training samples (0: unknown, a v1 file)
  at::Tensor rng;            // CPU generator state
};

// payload_crc32 of `state` (the tensors must be on the CPU).
uint32_t CheckpointCrc32(const CheckpointState& state);

// Writes `state` atomically (temp file, fsync, rename, folder fsync), 0666 less the umask and
// less group and other write permission (CheckpointFileMode).
// RESOURCE_EXHAUSTED when the disk or the quota is full.
absl::Status WriteCheckpoint(const std::string& path, const CheckpointState& state);

// Reads and verifies a checkpoint: NOT_FOUND when it cannot be opened; DATA_LOSS when it is not
// a checkpoint, is truncated, fails its checksum or has inconsistent fields.
absl::StatusOr<CheckpointState> ReadCheckpoint(const std::string& path);

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_CHECKPOINT_CHECKPOINT_H_
