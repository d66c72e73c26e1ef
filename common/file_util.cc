#include "common/file_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace ddp {
namespace {

constexpr absl::string_view kTempMarker = ".tmp.";

bool AllDigits(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Creates a fresh temp file beside `path` (O_EXCL) and returns its name through `tmp`.
int CreateTempFile(const std::string& path, mode_t mode, std::string* tmp) {
  // A name no other writer uses (pid, a per-process counter, the time, the host); O_EXCL makes
  // sure.
  static std::atomic<uint64_t> counter{0};
  static const std::string host = HostName();
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    *tmp = absl::StrCat(path, kTempMarker, ::getpid(), ".", counter.fetch_add(1), ".",
                        absl::GetCurrentTimeNanos() % 1000000, ".", host);
    fd = ::open(tmp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0 && errno != EEXIST) break;
  }
  return fd;
}

// Writes, fsyncs and publishes `data` at `path`, created with `create_mode` (less the umask), or
// exactly that mode when `set_exact_mode`.
absl::Status WriteAndRename(const std::string& path, absl::string_view data, mode_t create_mode,
                            bool set_exact_mode) {
  std::string tmp;
  ScopedFd fd(CreateTempFile(path, create_mode, &tmp));
  if (fd.get() < 0) return ErrnoError("create", tmp);
  absl::Status st = WriteAll(fd.get(), data, tmp);
  if (st.ok() && set_exact_mode && ::fchmod(fd.get(), create_mode) != 0) {
    st = ErrnoError("chmod", tmp);
  }
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

}  // namespace

ScopedFd::~ScopedFd() {
  if (fd_ >= 0) ::close(fd_);
}

int ScopedFd::Close() {
  const int rc = ::close(fd_);
  fd_ = -1;
  return rc;
}

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  const int err = errno;
  std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  if (err == ENOSPC || err == EDQUOT || err == EFBIG) {
    return absl::ResourceExhaustedError(std::move(message));
  }
  return absl::InternalError(std::move(message));
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

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view data, mode_t mode) {
  return WriteAndRename(path, data, mode, /*set_exact_mode=*/true);
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view data) {
  return WriteAndRename(path, data, 0666, /*set_exact_mode=*/false);
}

std::optional<TempFileName> ParseTempFileName(absl::string_view name) {
  for (size_t at = name.find(kTempMarker); at != absl::string_view::npos && at > 0;
       at = name.find(kTempMarker, at + 1)) {
    // "<pid>.<n>.<t>" and, in newer names, ".<host>" (which may itself hold dots).
    const std::vector<absl::string_view> fields =
        absl::StrSplit(name.substr(at + kTempMarker.size()), absl::MaxSplits('.', 3));
    if (fields.size() < 3 || !AllDigits(fields[0]) || !AllDigits(fields[1]) ||
        !AllDigits(fields[2])) {
      continue;
    }
    TempFileName parsed;
    if (!absl::SimpleAtoi(fields[0], &parsed.pid)) continue;
    if (fields.size() == 4) parsed.host = std::string(fields[3]);
    parsed.target = std::string(name.substr(0, at));
    return parsed;
  }
  return std::nullopt;
}

std::vector<std::string> RemoveStaleTempFiles(const std::string& dir,
                                              const std::function<bool(absl::string_view)>& owned,
                                              absl::Duration max_age) {
  std::vector<std::string> removed;
  std::unique_ptr<DIR, int (*)(DIR*)> handle(::opendir(dir.c_str()), &::closedir);
  if (handle == nullptr) return removed;
  const std::string host = HostName();
  const absl::Time now = absl::Now();
  while (const dirent* entry = ::readdir(handle.get())) {
    const std::string name = entry->d_name;
    const std::optional<TempFileName> temp = ParseTempFileName(name);
    if (!temp || !owned(temp->target)) continue;
    const std::string path = absl::StrCat(dir, "/", name);
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    bool dead = false;
    if (temp->host == host && temp->pid > 0 && temp->pid <= INT_MAX) {
      const pid_t pid = static_cast<pid_t>(temp->pid);
      dead = pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH;
    }
    const bool old = now - absl::FromTimeT(st.st_mtime) > max_age;
    if ((dead || old) && ::unlink(path.c_str()) == 0) removed.push_back(name);
  }
  return removed;
}

absl::StatusOr<std::string> ReadPrivateFile(const std::string& path, absl::string_view what,
                                            size_t max_bytes) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT)
      return absl::NotFoundError(absl::StrCat(what, " ", path, " does not exist"));
    return ErrnoError("stat", path);
  }
  const auto symlink = [&] {
    return absl::PermissionDeniedError(absl::StrCat(what, " ", path, " is a symlink; refusing it"));
  };
  if (S_ISLNK(st.st_mode)) return symlink();
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT)
      return absl::NotFoundError(absl::StrCat(what, " ", path, " does not exist"));
    if (errno == ELOOP) return symlink();
    return ErrnoError("open", path);
  }
  if (::fstat(fd.get(), &st) != 0) return ErrnoError("fstat", path);
  if (!S_ISREG(st.st_mode)) {
    return absl::PermissionDeniedError(absl::StrCat(what, " ", path, " is not a regular file"));
  }
  if (st.st_uid != ::geteuid()) {
    return absl::PermissionDeniedError(
        absl::StrCat(what, " ", path, " is owned by uid ", st.st_uid, ", not by this user"));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        what, " ", path, " has mode ", absl::StrFormat("%04o", st.st_mode & 0777),
        " (group/others may read or change the token); it must be 0600: chmod 600 it"));
  }
  const auto too_large = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, " is too large (more than ", max_bytes, " bytes)"));
  };
  if (static_cast<uint64_t>(st.st_size) > max_bytes) return too_large();
  std::string text(max_bytes + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("read", path);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > max_bytes) return too_large();
  text.resize(got);
  return text;
}

std::string HostName() {
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "localhost";
  return host;
}

}  // namespace ddp
