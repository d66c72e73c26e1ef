// Small POSIX file helpers shared by both planes: the dist_file (common/dist_file.cc) and the
// trainer's checkpoints (trainer/app/checkpoint.cc) are both published with
// WriteFileAtomically. POSIX only: LibTorch's own std::filesystem symbols clash with the
// toolchain's in torch-linked code.
//
// Thread safety: free functions without shared state; safe from any thread.
#ifndef SLURM_DDP_COMMON_FILE_UTIL_H_
#define SLURM_DDP_COMMON_FILE_UTIL_H_

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

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

// "<what> <path>: <strerror(errno)>" as an INTERNAL error.
absl::Status ErrnoError(absl::string_view what, const std::string& path);

// Writes all of `data`, retrying on EINTR and short writes. `path` names the file in errors.
absl::Status WriteAll(int fd, absl::string_view data, const std::string& path);

// The folder part of `path`: "." for a bare name, "/" for a file in the root.
std::string DirName(const std::string& path);

// Replaces `path` so that a reader sees the old file, no file, or the whole new one, also after
// a crash: writes a temp file beside it (O_EXCL, O_NOFOLLOW, `mode`), fsyncs it, renames it over
// `path` and fsyncs the folder. On error the temp file is removed and `path` is untouched.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view data, mode_t mode);

}  // namespace ddp

#endif  // SLURM_DDP_COMMON_FILE_UTIL_H_
