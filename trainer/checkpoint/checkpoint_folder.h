// What makes a checkpoint folder one user's and one run's: the trust checks on what is loaded,
// the mode checkpoint files are written with, the folder's lock and owner record, and whether the
// writer of a temp file is still alive.
//
// Trust: a checkpoint is code-like input (its tensors become the model), so a file or folder
// that another user owns, or that group or others may write, is refused rather than loaded: a
// group member could have planted it. Files are written without group or other write permission
// whatever the umask (CheckpointFileMode).
//
// Ownership: `<dir>/lock` is held with flock(2) by the process that writes the folder's
// checkpoints (rank 0) for as long as it lives, and records who holds it:
//   slurm-ddp-checkpoint-owner v1
//   owner=<the job's identity>
//   run_id=<8 hex digits, empty until chosen>
//   host=<host name>
//   pid=<pid>
//   since=<unix seconds>
//   end=1
// The kernel drops the lock when the process ends (however it ends); a suspended process
// (SIGSTOP, `scontrol suspend`) keeps it. Another job is refused while the lock is held; the
// same job (a requeue, a replaced rank 0 whose predecessor is still being fenced) continues.
//
// Thread safety: CheckpointFolderLock is not thread-safe; the free functions have no shared state.
#ifndef SLURM_DDP_TRAINER_CHECKPOINT_CHECKPOINT_FOLDER_H_
#define SLURM_DDP_TRAINER_CHECKPOINT_CHECKPOINT_FOLDER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ddp {

inline constexpr char kFolderLockName[] = "lock";

// OK when `path` (a file, or a folder) is owned by this process's effective user and neither its
// group nor others may write it. PERMISSION_DENIED naming `what` and `path` and what is wrong.
absl::Status CheckOwnedAndPrivate(const std::string& path, absl::string_view what);

// The mode checkpoint files are created with: 0666 less the umask, less group and other write.
mode_t CheckpointFileMode();

// When process `pid` of this host started (unix seconds), from /proc; nullopt when it does not
// exist (or cannot be read).
std::optional<double> ProcessStartTime(pid_t pid);

// Whether the writer of a temp file (WriteFileAtomically's names: pid and host) that was last
// modified at `mtime` (unix seconds) may still be writing it: a process of this host with that
// pid that started before the file was last written. A writer on another host cannot be asked:
// nullopt.
std::optional<bool> TempWriterAlive(int64_t pid, const std::string& host, double mtime);

struct FolderOwner {
  std::string owner;
  std::string run_id;
  std::string host;
  int64_t pid = 0;
  int64_t since = 0;
};
std::string SerializeFolderOwner(const FolderOwner& owner);
std::optional<FolderOwner> ParseFolderOwner(absl::string_view text);

class CheckpointFolderLock {
 public:
  // Takes <dir>/lock for `owner`. FAILED_PRECONDITION naming the job, run and process that hold
  // it when a live process of another owner does. When the same owner holds it (or the file
  // system has no locks), the result does not hold the lock: held() is false.
  static absl::StatusOr<std::unique_ptr<CheckpointFolderLock>> Acquire(const std::string& dir,
                                                                       const std::string& owner);

  // The same check without taking the lock, for the processes that only read the folder.
  static absl::Status CheckAvailable(const std::string& dir, const std::string& owner);

  ~CheckpointFolderLock();
  CheckpointFolderLock(const CheckpointFolderLock&) = delete;
  CheckpointFolderLock& operator=(const CheckpointFolderLock&) = delete;

  // Records the run now writing the folder (when held).
  absl::Status SetRun(const std::string& run_id);
  bool held() const { return held_; }

 private:
  CheckpointFolderLock(int fd, bool held, FolderOwner record)
      : fd_(fd), held_(held), record_(std::move(record)) {}

  int fd_;
  bool held_;
  FolderOwner record_;
};

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_CHECKPOINT_CHECKPOINT_FOLDER_H_
