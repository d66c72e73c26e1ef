// Small POSIX file helpers shared by both planes: the dist_file (common/dist_file.cc) and the
// trainer's checkpoints (trainer/checkpoint/checkpoint_store.cc) are both published with
// WriteFileAtomically, whose temp files carry the writer's host and pid so that a later start can
// tell a dead writer's leftovers (RemoveStaleTempFiles). POSIX only: LibTorch's own
// std::filesystem symbols clash with the toolchain's in torch-linked code.
//
// Thread safety: free functions without shared state; safe from any thread.
#ifndef SLURM_DDP_COMMON_FILE_UTIL_H_
#define SLURM_DDP_COMMON_FILE_UTIL_H_

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ddp {

// Owns a file descriptor; closes it on destruction.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd();
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }
  // Closes now and returns close()'s result (it can report a deferred write error).
  int Close();

 private:
  int fd_;
};

// "<what> <path>: <strerror(errno)>". RESOURCE_EXHAUSTED when errno says the disk or the quota
// is full (ENOSPC, EDQUOT, EFBIG), so callers can tell "no room" from other failures; INTERNAL
// otherwise.
absl::Status ErrnoError(absl::string_view what, const std::string& path);

// Writes all of `data`, retrying on EINTR and short writes. `path` names the file in errors.
absl::Status WriteAll(int fd, absl::string_view data, const std::string& path);

// The folder part of `path`: "." for a bare name, "/" for a file in the root.
std::string DirName(const std::string& path);
// The part of `path` after the last '/'.
std::string BaseName(const std::string& path);

// Replaces `path` so that a reader sees the old file, no file, or the whole new one, also after
// a crash: writes a temp file beside it (O_EXCL, O_NOFOLLOW), fsyncs it, renames it over `path`
// and fsyncs the folder. On error the temp file is removed and `path` is untouched.
// This form sets exactly `mode`, whatever the umask: for private files (the dist_file, 0600).
absl::Status WriteFileAtomically(const std::string& path, absl::string_view data, mode_t mode);
// This form creates the file 0666 less the process's umask, as open(2) and torch.save do.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view data);

// A temp file of WriteFileAtomically: "<target>.tmp.<pid>.<n>.<t>.<host>" (files written before
// the host was added lack ".<host>").
struct TempFileName {
  std::string target;  // the name the writer meant to publish
  int64_t pid = 0;
  std::string host;  // empty when the name does not say
};
std::optional<TempFileName> ParseTempFileName(absl::string_view name);

// Removes the temp files in `dir` whose target satisfies `owned` and whose writer is gone: one
// written on this host by a process that no longer exists, or any not modified for `max_age`
// (a live writer keeps writing; a writer on another host cannot be asked). Returns the names it
// removed. Errors other than a missing folder are ignored: this is best-effort cleanup.
std::vector<std::string> RemoveStaleTempFiles(const std::string& dir,
                                              const std::function<bool(absl::string_view)>& owned,
                                              absl::Duration max_age);

// Reads a file that holds a secret (the dist_file, a token file), all of it. Refused with
// PERMISSION_DENIED when it is a symlink, not a regular file, owned by another user, or open to
// group or others (anything but 0600/0400); NOT_FOUND when missing; INVALID_ARGUMENT when larger
// than `max_bytes`. `what` names the file in messages: "<what> <path> has mode 0644 ...".
absl::StatusOr<std::string> ReadPrivateFile(const std::string& path, absl::string_view what,
                                            size_t max_bytes);

// This machine's host name as gethostname() reports it ("localhost" if it cannot).
std::string HostName();

}  // namespace ddp

#endif  // SLURM_DDP_COMMON_FILE_UTIL_H_
