// What ties checkpoints to a run: a run identity (8 hex digits, fresh when a run starts, kept
// when it resumes), the file names that carry it, and the folder's run manifest.
//
//   <dir>/ckpt-<run id>-<step, 10 digits>.pt   periodic, epoch-end and stop checkpoints
//   <dir>/ckpt-<step>.pt                         the same, written before runs had identities
//   <dir>/final.pt                               the last checkpoint of a finished run
//   <dir>/current-run                            the manifest: which run owns the folder now
//
// The manifest is a small text file, written atomically:
//   slurm-ddp-run v1
//   run_id=<8 hex digits>
//   finished_epoch=<epochs of final.pt, or -1 while the run is not finished>
//   finished_step=<step of final.pt, or -1>
//   end=1
//
// Thread safety: plain values and pure functions.
#ifndef SLURM_DDP_TRAINER_CHECKPOINT_CHECKPOINT_RUN_H_
#define SLURM_DDP_TRAINER_CHECKPOINT_CHECKPOINT_RUN_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ddp {

inline constexpr char kFinalCheckpointName[] = "final.pt";
inline constexpr char kRunManifestName[] = "current-run";

// A fresh run identity: 8 random lowercase hex digits.
absl::StatusOr<std::string> NewRunId();
bool IsRunId(absl::string_view s);

// "ckpt-<run>-<step>.pt" (run must satisfy IsRunId).
std::string CheckpointFileName(absl::string_view run_id, int64_t step);

struct CheckpointFileInfo {
  std::string run_id;  // empty for a file of the format without run identities
  int64_t step = 0;
};
// The run and step a checkpoint file name carries, or nullopt for any other name.
std::optional<CheckpointFileInfo> ParseCheckpointFileName(absl::string_view name);

struct RunManifest {
  std::string run_id;
  int64_t finished_epoch = -1;
  int64_t finished_step = -1;
  bool finished() const { return finished_step >= 0; }
};
std::string SerializeRunManifest(const RunManifest& manifest);
// INVALID_ARGUMENT naming what is wrong.
absl::StatusOr<RunManifest> ParseRunManifest(absl::string_view text);

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_CHECKPOINT_CHECKPOINT_RUN_H_
