#include "common/dist_file_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ddp {
namespace {

// The holder's line (what it wrote), for the refusal; empty when it cannot be read.
std::string HolderOf(int fd) {
  char buf[512];
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return "";
  std::string line(buf, static_cast<size_t>(n));
  line = line.substr(0, line.find('\n'));
  for (char& c : line) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return line;
}

bool SameFile(int fd, const std::string& path) {
  struct stat a;
  struct stat b;
  return ::fstat(fd, &a) == 0 && ::lstat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

}  // namespace

std::string DistFileLockPath(const std::string& dist_file) { return dist_file + ".lock"; }

absl::Status CheckNoOtherJobHolds(const std::string& dist_file, const std::string& job_id) {
  const std::string path = DistFileLockPath(dist_file);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return absl::OkStatus();  // no lock file (or not one we may read): nothing known
  if (::flock(fd, LOCK_SH | LOCK_NB) == 0) {
    ::flock(fd, LOCK_UN);
    ::close(fd);
    return absl::OkStatus();  // nobody holds it
  }
  const std::string holder = HolderOf(fd);
  ::close(fd);
  if (holder.empty() || absl::StartsWith(holder, absl::StrCat("job ", job_id, " "))) {
    return absl::OkStatus();
  }
  return absl::AlreadyExistsError(
      absl::StrCat("dist_file ", dist_file, " belongs to a job that is still running (", holder,
                   "): job ", job_id, " cannot use it; give this job its own --dist-file"));
}

absl::StatusOr<std::unique_ptr<DistFileLock>> DistFileLock::Acquire(const std::string& dist_file,
                                                                    const std::string& owner) {
  const std::string path = DistFileLockPath(dist_file);
  // A reader's probe (CheckNoOtherJobHolds) holds a shared lock for a moment: a refusal is
  // decided only when the lock stays held this long.
  const absl::Time give_up = absl::Now() + absl::Seconds(1);
  // A lock file removed by its job as it ended (Release) between our open and flock is no lock:
  // take the one at the path now.
  for (int attempt = 0; attempt < 8; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
      if (errno == ELOOP) {
        return absl::PermissionDeniedError(
            absl::StrCat("dist_file lock ", path, " is a symbolic link; refusing it"));
      }
      return absl::InternalError(
          absl::StrCat("cannot open dist_file lock ", path, ": ", std::strerror(errno)));
    }
    struct stat sb;
    if (::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != ::geteuid()) {
      ::close(fd);
      return absl::PermissionDeniedError(absl::StrCat(
          "dist_file lock ", path, " is not a regular file of this user; refusing it"));
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      const std::string holder = HolderOf(fd);
      ::close(fd);
      if (err == EWOULDBLOCK && absl::Now() < give_up) {
        absl::SleepFor(absl::Milliseconds(20));
        --attempt;  // the same lock, not a replaced file
        continue;
      }
      if (err != EWOULDBLOCK) {
        return absl::InternalError(
            absl::StrCat("cannot lock dist_file lock ", path, ": ", std::strerror(err)));
      }
      return absl::AlreadyExistsError(absl::StrCat(
          "dist_file ", dist_file, " belongs to a job that is still running (",
          holder.empty() ? "holder unknown" : holder,
          "): refusing to start another job on it; give this job its own --dist-file"));
    }
    if (!SameFile(fd, path)) {  // released and removed meanwhile: try the new one
      ::close(fd);
      continue;
    }
    const std::string line = owner + "\n";
    if (::ftruncate(fd, 0) != 0 ||
        ::pwrite(fd, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size())) {
      const int err = errno;
      ::close(fd);
      return absl::InternalError(
          absl::StrCat("cannot write dist_file lock ", path, ": ", std::strerror(err)));
    }
    return std::unique_ptr<DistFileLock>(new DistFileLock(path, fd, /*adopted=*/false));
  }
  return absl::InternalError(absl::StrCat("dist_file lock ", path, " keeps being replaced"));
}

absl::StatusOr<std::unique_ptr<DistFileLock>> DistFileLock::Adopt(const std::string& dist_file,
                                                                  int fd) {
  const std::string path = DistFileLockPath(dist_file);
  // Our own lock (the same open file) is granted again; another's is refused.
  if (fd < 0 || !SameFile(fd, path) || ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dist-file-lock-fd ", fd, " does not hold the lock ", path));
  }
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  return std::unique_ptr<DistFileLock>(new DistFileLock(path, fd, /*adopted=*/true));
}

DistFileLock::~DistFileLock() {
  if (fd_ >= 0) ::close(fd_);
}

void DistFileLock::Release() {
  if (fd_ < 0) return;
  if (SameFile(fd_, path_)) ::unlink(path_.c_str());
  ::close(fd_);
  fd_ = -1;
}

}  // namespace ddp
