// One live job per dist_file: `<dist_file>.lock` (mode 0600), flock(2)-ed exclusively for as long
// as the job lives. Task 0 of a ddp-trainer job takes it before it starts anything and hands it
// to its coordinator (an inherited descriptor, ddp-coordinator --dist-file-lock-fd), so the job
// holds its path through every restart of its coordinator; a coordinator started by hand takes
// it itself. A second job started on the same path finds it held and is refused, naming the job
// that holds it (which the holder writes into the file). The kernel drops the lock when its last
// holder dies, so a dead job's lock is taken over; nothing stale is ever trusted.
//
// flock works on local file systems and on NFS (Linux emulates it with byte-range locks there).
//
// Thread safety: an object is used by one thread; Acquire and Adopt are safe from any thread.
#ifndef SLURM_DDP_COMMON_DIST_FILE_LOCK_H_
#define SLURM_DDP_COMMON_DIST_FILE_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace ddp {

// "<dist_file>.lock"
std::string DistFileLockPath(const std::string& dist_file);

// For a reader waiting for its own job's dist_file (a task other than 0): ALREADY_EXISTS,
// naming the holder, when a live job other than `job_id` holds `dist_file`'s lock (its own task 0
// is refused then, and so is this task); OK when nobody holds it or `job_id` does. Probes with
// a shared lock taken and dropped at once (which works across NFS clients too); Acquire retries
// for a moment, so that a probe never makes task 0 refuse its own job.
absl::Status CheckNoOtherJobHolds(const std::string& dist_file, const std::string& job_id);

class DistFileLock {
 public:
  // Takes the lock of `dist_file` and writes `owner` (one line naming the job) into it.
  // ALREADY_EXISTS, naming the holder, when a live job holds it; INTERNAL when the lock file
  // cannot be opened (PERMISSION_DENIED for a symlink or a file of another user).
  static absl::StatusOr<std::unique_ptr<DistFileLock>> Acquire(const std::string& dist_file,
                                                               const std::string& owner);
  // Takes over the inherited descriptor `fd`, which must hold the lock of `dist_file`
  // (INVALID_ARGUMENT otherwise). The object closes it, never removes the file.
  static absl::StatusOr<std::unique_ptr<DistFileLock>> Adopt(const std::string& dist_file, int fd);
  // Closes the descriptor (the lock goes once no process holds it any longer).
  ~DistFileLock();
  DistFileLock(const DistFileLock&) = delete;
  DistFileLock& operator=(const DistFileLock&) = delete;

  int fd() const { return fd_; }
  bool adopted() const { return adopted_; }
  // Removes the lock file while still holding it (the job is over); then closes.
  void Release();

 private:
  DistFileLock(std::string path, int fd, bool adopted)
      : path_(std::move(path)), fd_(fd), adopted_(adopted) {}

  const std::string path_;
  int fd_;
  const bool adopted_;
};

}  // namespace ddp

#endif  // SLURM_DDP_COMMON_DIST_FILE_LOCK_H_
