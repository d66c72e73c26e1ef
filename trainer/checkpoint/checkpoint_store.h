// The checkpoints of one run in one folder (--checkpoint-dir): opening the folder, choosing what
// to resume, saving, pruning and the final.pt of a finished run. File names and the folder's run
// manifest are in checkpoint_run.h, the file format in checkpoint.h.
//
// What "the current run" is: a run starts with a fresh identity under `--resume none`, or under
// `--resume auto` when there is nothing to resume; it keeps its identity when it resumes, so a
// requeued or relaunched job (same command, --resume auto) continues the run it was. The folder's
// manifest names the current run; `--resume auto` looks only at that run's checkpoints (in a
// folder without a manifest: the newest checkpoint file that loads, of any run). Pruning keeps
// the newest `keep` checkpoints of the current run and never touches another run's files. When a
// run continues from an earlier point than its newest files (a corrupt newest file, or
// --resume PATH), its first save removes those later files: they belong to an abandoned history.
//
// One run at a time: the folder must belong to this user and be closed to group and others'
// writes, and rank 0 holds its lock (checkpoint_folder.h) from PlanResume on, so a second job
// pointed at the same folder is refused (naming the job and run that hold it) instead of adopting
// or pruning the first one's run. Every checkpoint loaded must be this user's and not writable by
// group or others. A temp file is removed only when its writer is gone: a process of this host
// that no longer exists (pid and start time), or, while this process holds the folder's lock, a
// writer on another host; never for being idle (a suspended job's writer keeps its files).
//
// A full disk or quota (RESOURCE_EXHAUSTED) on a periodic checkpoint is a warning and leaves the
// older checkpoints in place; on a stop or final checkpoint it is an error that says which older
// checkpoint a relaunch resumes from (ResumableAfter).
//
// Thread safety: not thread-safe; rank 0's main thread uses it (other ranks only Open it, which
// checks the folder).
#ifndef SLURM_DDP_TRAINER_CHECKPOINT_CHECKPOINT_STORE_H_
#define SLURM_DDP_TRAINER_CHECKPOINT_CHECKPOINT_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_folder.h"
#include "trainer/checkpoint/checkpoint_run.h"

namespace ddp {

struct CheckpointStoreOptions {
  std::string dir;  // empty: no folder; only an explicit --resume PATH can be read
  int keep = 3;     // checkpoints of the current run kept besides final.pt
  // The job's identity ("job <id>"): the folder is refused while a live process of another
  // identity holds it; the same identity (a requeued job) continues. Empty: this process alone.
  std::string owner = std::string();
};

// What this run asks for and what a checkpoint must match to be resumed.
struct ResumeRequest {
  std::string resume = "auto";  // auto | none | PATH
  int64_t seed = 0;
  int64_t dataset_size = 0;
  int64_t epochs = 0;
  bool force = false;  // --force-resume: resume despite a different seed or data set size
};

struct ResumePlan {
  std::optional<CheckpointState> state;  // nullopt: start from scratch
  std::string path;                      // the file `state` came from
  bool complete = false;                 // the run had already trained every epoch
  std::vector<std::string> warnings;     // skipped files, an overridden mismatch, ...
};

enum class CheckpointKind {
  kPeriodic,  // every --checkpoint-every steps and at the end of each epoch but the last
  kStop,      // the checkpoint of a stop (requeue, preemption)
  kFinal,     // the end of the last epoch
};

struct SavedCheckpoint {
  std::string path;     // empty when not written
  std::string warning;  // why it was not written
};

struct FinalCheckpoint {
  std::string path;              // <dir>/final.pt
  bool already_present = false;  // final.pt already held the run's last checkpoint
};

class CheckpointStore {
 public:
  // Creates the folder (0755 less the umask) and checks that it is writable, this user's, not
  // writable by group or others, and not held by another job. FAILED_PRECONDITION naming
  // --checkpoint-dir when it cannot be used, PERMISSION_DENIED when it is not trusted.
  static absl::StatusOr<std::unique_ptr<CheckpointStore>> Open(CheckpointStoreOptions options);

  CheckpointStore(const CheckpointStore&) = delete;
  CheckpointStore& operator=(const CheckpointStore&) = delete;

  // Takes the folder's lock, removes temp files of dead writers, chooses the run and the
  // checkpoint to start from, and records the run in the manifest.
  // FAILED_PRECONDITION when another job holds the folder, or the checkpoint was written with
  // another seed or data set size (and !request.force); PERMISSION_DENIED when a checkpoint (or
  // its folder) is another user's or writable by group or others; NOT_FOUND / DATA_LOSS when an
  // explicit PATH cannot be resumed.
  absl::StatusOr<ResumePlan> PlanResume(const ResumeRequest& request);

  // Writes `state` as the current run's checkpoint of its step, then prunes.
  absl::StatusOr<SavedCheckpoint> Save(CheckpointState state, CheckpointKind kind);

  // Makes <dir>/final.pt the run's last checkpoint and marks the run finished in the manifest.
  absl::StatusOr<FinalCheckpoint> Finish();

  const std::string& dir() const { return options_.dir; }
  const std::string& run_id() const { return run_id_; }
  const std::string& last_checkpoint() const { return last_path_; }
  // Temp files of dead writers that PlanResume removed.
  const std::vector<std::string>& removed_temp_files() const { return removed_temp_files_; }

 private:
  explicit CheckpointStore(CheckpointStoreOptions options) : options_(std::move(options)) {}

  std::string PathOf(const std::string& name) const;
  absl::StatusOr<std::optional<RunManifest>> ReadManifest() const;
  absl::Status WriteManifest(const RunManifest& manifest) const;
  // Checkpoints in the folder, newest first: the current run's (when `run_id` is set) by step,
  // otherwise every checkpoint by modification time.
  std::vector<std::string> Candidates(const std::optional<RunManifest>& manifest) const;
  void Prune(int64_t saved_step);
  // Removes the temp files whose writer is gone (see the class comment).
  void RemoveDeadWritersTempFiles();

  CheckpointStoreOptions options_;
  std::unique_ptr<CheckpointFolderLock> lock_;  // from PlanResume on (with a folder)
  std::string run_id_;
  RunManifest manifest_;   // as last written or read
  std::string last_path_;  // newest checkpoint of the run on disk (saved or resumed from)
  int64_t last_epoch_ = -1;
  int64_t last_step_ = -1;
  std::vector<std::string> removed_temp_files_;
};

// For an error of Save or Finish: the checkpoint a relaunch resumes from, when the disk or quota
// filled up on a checkpoint that had to be written and an older one of the run exists.
std::optional<std::string> ResumableAfter(const absl::Status& status);

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_CHECKPOINT_CHECKPOINT_STORE_H_
