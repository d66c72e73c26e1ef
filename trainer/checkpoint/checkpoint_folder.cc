#include "trainer/checkpoint/checkpoint_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/file_util.h"

namespace ddp {
namespace {

constexpr char kOwnerHeader[] = "slurm-ddp-checkpoint-owner v1";
constexpr size_t kMaxOwnerBytes = 4096;
// A process that only checks the lock (CheckAvailable) holds it for an instant: the writer that
// takes it tries again for this long before it believes another process holds it.
constexpr absl::Duration kAcquireRetry = absl::Seconds(2);

std::string Octal(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

std::optional<FolderOwner> ReadOwner(int fd) {
  std::string text(kMaxOwnerBytes, '\0');
  const ssize_t n = ::pread(fd, text.data(), text.size(), 0);
  if (n <= 0) return std::nullopt;
  text.resize(static_cast<size_t>(n));
  return ParseFolderOwner(text);
}

std::string Describe(const std::optional<FolderOwner>& who) {
  if (!who) return "another process (its owner record cannot be read)";
  return absl::StrCat(who->owner, who->run_id.empty() ? "" : absl::StrCat(" (run ", who->run_id),
                      who->run_id.empty() ? " (" : ", ", "pid ", who->pid, " on ", who->host,
                      ", since ",
                      absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixSeconds(who->since),
                                       absl::LocalTimeZone()),
                      ")");
}

absl::Status InUse(const std::string& dir, const std::optional<FolderOwner>& who) {
  return absl::FailedPreconditionError(absl::StrCat(
      "checkpoint folder ", dir, " is in use by ", Describe(who),
      ": two jobs must not share a checkpoint folder; use another --checkpoint-dir, or wait for "
      "that job to end"));
}

// flock(2) that fails only for a holder that keeps the lock (retried across brief probes).
// Returns 0, EWOULDBLOCK, or the errno of a file system without locks.
int LockWithRetry(int fd, int how, absl::Duration retry) {
  const absl::Time deadline = absl::Now() + retry;
  for (;;) {
    if (::flock(fd, how | LOCK_NB) == 0) return 0;
    const int err = errno;
    if (err == EINTR) continue;
    if (err != EWOULDBLOCK || absl::Now() >= deadline) return err;
    absl::SleepFor(absl::Milliseconds(50));
  }
}

int OpenLockFile(const std::string& dir) {
  const std::string path = absl::StrCat(dir, "/", kFolderLockName);
  return ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, CheckpointFileMode());
}

}  // namespace

absl::Status CheckOwnedAndPrivate(const std::string& path, absl::string_view what) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    return absl::NotFoundError(absl::StrCat(what, " ", path, ": ", std::strerror(err)));
  }
  if (st.st_uid != ::geteuid()) {
    return absl::PermissionDeniedError(absl::StrCat(what, " ", path, " is owned by uid ", st.st_uid,
                                                    ", not by this user (uid ", ::geteuid(),
                                                    "): refusing to load from it"));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    const char* who = (st.st_mode & S_IWGRP) && (st.st_mode & S_IWOTH) ? "its group and others"
                      : (st.st_mode & S_IWGRP)                         ? "its group"
                                                                       : "others";
    return absl::PermissionDeniedError(absl::StrCat(
        what, " ", path, " is writable by ", who, " (mode ", Octal(st.st_mode),
        "): another user could have planted a checkpoint; refusing to load from it (chmod go-w ",
        path, ")"));
  }
  return absl::OkStatus();
}

mode_t CheckpointFileMode() {
  mode_t umask = 022;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    unsigned value = 0;
    if (line.rfind("Umask:", 0) == 0 && std::sscanf(line.c_str() + 6, "%o", &value) == 1) {
      umask = static_cast<mode_t>(value);
      break;
    }
  }
  return 0666 & ~umask & ~static_cast<mode_t>(S_IWGRP | S_IWOTH);
}

std::optional<double> ProcessStartTime(pid_t pid) {
  std::ifstream stat_file(absl::StrCat("/proc/", pid, "/stat"));
  std::stringstream buffer;
  buffer << stat_file.rdbuf();
  const std::string text = buffer.str();
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  // Fields after the command: state is field 3, starttime field 22.
  const std::vector<std::string> fields = absl::StrSplit(text.substr(paren + 2), ' ');
  uint64_t ticks = 0;
  if (fields.size() < 20 || !absl::SimpleAtoi(fields[19], &ticks)) return std::nullopt;
  std::ifstream proc_stat("/proc/stat");
  std::string line;
  int64_t boot = -1;
  while (std::getline(proc_stat, line)) {
    if (line.rfind("btime ", 0) == 0 && absl::SimpleAtoi(line.substr(6), &boot)) break;
  }
  const long hz = ::sysconf(_SC_CLK_TCK);  // NOLINT(runtime/int)
  if (boot < 0 || hz <= 0) return std::nullopt;
  return static_cast<double>(boot) + static_cast<double>(ticks) / static_cast<double>(hz);
}

std::optional<bool> TempWriterAlive(int64_t pid, const std::string& host, double mtime) {
  if (host != HostName()) return std::nullopt;
  if (pid <= 0 || pid > INT32_MAX) return false;
  if (pid == ::getpid()) return true;
  const std::optional<double> start = ProcessStartTime(static_cast<pid_t>(pid));
  // Gone, or a later process that reuses the pid (it started after the file was last written;
  // a minute of slack for clock steps since boot).
  return start.has_value() && *start <= mtime + 60.0;
}

std::string SerializeFolderOwner(const FolderOwner& o) {
  return absl::StrCat(kOwnerHeader, "\nowner=", o.owner, "\nrun_id=", o.run_id, "\nhost=", o.host,
                      "\npid=", o.pid, "\nsince=", o.since, "\nend=1\n");
}

std::optional<FolderOwner> ParseFolderOwner(absl::string_view text) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (lines.empty() || lines[0] != kOwnerHeader) return std::nullopt;
  FolderOwner o;
  bool end = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t eq = lines[i].find('=');
    if (eq == absl::string_view::npos) continue;
    const absl::string_view key = lines[i].substr(0, eq);
    const absl::string_view value = lines[i].substr(eq + 1);
    if (key == "owner") o.owner = std::string(value);
    if (key == "run_id") o.run_id = std::string(value);
    if (key == "host") o.host = std::string(value);
    if (key == "pid" && !absl::SimpleAtoi(value, &o.pid)) return std::nullopt;
    if (key == "since" && !absl::SimpleAtoi(value, &o.since)) return std::nullopt;
    if (key == "end") end = value == "1";
  }
  if (!end || o.owner.empty()) return std::nullopt;
  return o;
}

absl::StatusOr<std::unique_ptr<CheckpointFolderLock>> CheckpointFolderLock::Acquire(
    const std::string& dir, const std::string& owner) {
  const int fd = OpenLockFile(dir);
  if (fd < 0) return ErrnoError("open lock", absl::StrCat(dir, "/", kFolderLockName));
  std::unique_ptr<CheckpointFolderLock> lock(new CheckpointFolderLock(fd, false, FolderOwner()));
  FolderOwner me;
  me.owner = owner;
  me.host = HostName();
  me.pid = ::getpid();
  me.since = absl::ToUnixSeconds(absl::Now());
  // Held by a live process (a suspended one too): only the same job may go on. A process that
  // only checks (CheckAvailable) holds it for an instant: try again before refusing.
  const absl::Time deadline = absl::Now() + kAcquireRetry;
  int err = LockWithRetry(fd, LOCK_EX, absl::ZeroDuration());
  std::optional<FolderOwner> recorded = ReadOwner(fd);
  while (err == EWOULDBLOCK && !(recorded && recorded->owner == owner)) {
    if (absl::Now() >= deadline) return InUse(dir, recorded);
    absl::SleepFor(absl::Milliseconds(50));
    err = LockWithRetry(fd, LOCK_EX, absl::ZeroDuration());
    recorded = ReadOwner(fd);
  }
  bool held = err == 0;
  if (err == EWOULDBLOCK) {
    // The same owner holds it: go on without it.
  } else if (err != 0) {
    // No locks on this file system: the record alone, refused when it names another owner's
    // process that is alive on this host or that runs on another host (which cannot be asked).
    if (recorded && recorded->owner != owner) {
      const std::optional<bool> alive =
          TempWriterAlive(recorded->pid, recorded->host, static_cast<double>(recorded->since));
      if (!alive.has_value() || *alive) {
        absl::Status st = InUse(dir, recorded);
        return absl::FailedPreconditionError(
            absl::StrCat(st.message(), " (this file system has no locks: delete ", dir, "/",
                         kFolderLockName, " once that job is gone)"));
      }
    }
    held = true;  // the record is ours now
  }
  lock->held_ = held;
  lock->record_ = std::move(me);
  if (absl::Status st = lock->SetRun(""); !st.ok()) return st;
  return lock;
}

absl::Status CheckpointFolderLock::CheckAvailable(const std::string& dir,
                                                  const std::string& owner) {
  const int fd = OpenLockFile(dir);
  if (fd < 0) return ErrnoError("open lock", absl::StrCat(dir, "/", kFolderLockName));
  ScopedFd guard(fd);
  const int err = LockWithRetry(fd, LOCK_SH, absl::ZeroDuration());
  if (err != EWOULDBLOCK) return absl::OkStatus();  // free (released with the fd), or no locks
  std::optional<FolderOwner> recorded = ReadOwner(fd);
  // The holder may be rewriting its record this instant.
  for (int i = 0; i < 4 && !recorded; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    recorded = ReadOwner(fd);
  }
  if (recorded && recorded->owner == owner) return absl::OkStatus();
  return InUse(dir, recorded);
}

CheckpointFolderLock::~CheckpointFolderLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

absl::Status CheckpointFolderLock::SetRun(const std::string& run_id) {
  if (!held_) return absl::OkStatus();
  record_.run_id = run_id;
  const std::string text = SerializeFolderOwner(record_);
  if (::pwrite(fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    return ErrnoError("write", kFolderLockName);
  }
  if (::ftruncate(fd_, static_cast<off_t>(text.size())) != 0) {
    return ErrnoError("truncate", kFolderLockName);
  }
  return absl::OkStatus();
}

}  // namespace ddp
