#include "common/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ddp {

ScopedFd::~ScopedFd() {
  if (fd_ >= 0) ::close(fd_);
}

int ScopedFd::Close() {
  const int rc = ::close(fd_);
  fd_ = -1;
  return rc;
}

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

absl::Status WriteAll(int fd, absl::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("write", path);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view data, mode_t mode) {
  // A name no other writer uses (pid, a per-process counter, the time); O_EXCL makes sure.
  static std::atomic<uint64_t> counter{0};
  std::string tmp;
  int raw_fd = -1;
  for (int attempt = 0; attempt < 100 && raw_fd < 0; ++attempt) {
    tmp = absl::StrCat(path, ".tmp.", ::getpid(), ".", counter.fetch_add(1), ".",
                       absl::GetCurrentTimeNanos() % 1000000);
    raw_fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (raw_fd < 0 && errno != EEXIST) break;
  }
  ScopedFd fd(raw_fd);
  if (fd.get() < 0) return ErrnoError("create", tmp);
  absl::Status st = WriteAll(fd.get(), data, tmp);
  if (st.ok() && ::fchmod(fd.get(), mode) != 0) st = ErrnoError("chmod", tmp);  // despite umask
  if (st.ok() && ::fsync(fd.get()) != 0) st = ErrnoError("fsync", tmp);
  if (fd.Close() != 0 && st.ok()) st = ErrnoError("close", tmp);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    st = ErrnoError(absl::StrCat("rename to ", path, ":"), tmp);
  }
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  const std::string dir = DirName(path);
  ScopedFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd.get() < 0) return ErrnoError("open folder", dir);
  if (::fsync(dfd.get()) != 0) return ErrnoError("fsync folder", dir);
  return absl::OkStatus();
}

}  // namespace ddp
