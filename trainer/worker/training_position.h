// Where a worker is in training — the committed optimizer step and the data position — and its
// wire form: a small, versioned record with explicit fields, checked on decode. Ranks agree on
// the start point (and, after a rebuild, on the most advanced rank's position) by broadcasting
// this record (state_sync.h).
//
// Record, version 1, little-endian, 44 bytes:
//   0  magic "DDPP"        4  u16 version (1)      6  u16 field count (4)
//   8  i64 epoch          16  i64 step            24  i64 consumed    32  i64 consumed_world_size
//   40 u32 FNV-1a of bytes 0..39
// Decode rejects a wrong size, magic, version, field count or checksum, and values out of range,
// each with a one-line error that says which.
//
// Thread safety: plain values and pure functions.
#ifndef SLURM_DDP_TRAINER_WORKER_TRAINING_POSITION_H_
#define SLURM_DDP_TRAINER_WORKER_TRAINING_POSITION_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ddp {

// The learning-rate schedule's position is (epoch, step): LearningRate() depends on nothing else.
struct TrainingPosition {
  int64_t epoch = 0;
  int64_t step = 0;                 // global optimizer steps taken (committed)
  int64_t consumed = 0;             // positions of `epoch` already consumed (sampler_plan.h)
  int64_t consumed_world_size = 0;  // world that consumed them (0: a fresh epoch)

  bool operator==(const TrainingPosition& o) const {
    return epoch == o.epoch && step == o.step && consumed == o.consumed &&
           consumed_world_size == o.consumed_world_size;
  }
  bool operator!=(const TrainingPosition& o) const { return !(*this == o); }
};

// "epoch 1, step 24, 384 samples of the epoch done (world 2)"
std::string DescribePosition(const TrainingPosition& p);

inline constexpr uint16_t kPositionRecordVersion = 1;
inline constexpr size_t kPositionRecordSize = 44;

std::vector<uint8_t> EncodePosition(const TrainingPosition& position);
// DATA_LOSS naming what is wrong with `record`.
absl::StatusOr<TrainingPosition> DecodePosition(absl::Span<const uint8_t> record);

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_WORKER_TRAINING_POSITION_H_
