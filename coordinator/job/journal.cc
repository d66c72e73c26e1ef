#include "coordinator/job/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ddp {
namespace {

absl::Status WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("write: ", std::strerror(errno)));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status SyncDirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", dir, ": ", std::strerror(errno)));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return absl::InternalError(absl::StrCat("fsync ", dir, ": ", std::strerror(errno)));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadAll(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    const absl::Status st = errno == ENOENT
                                ? absl::NotFoundError(absl::StrCat("no journal at ", path))
                                : absl::PermissionDeniedError(absl::StrCat(
                                      "cannot open journal ", path, ": ", std::strerror(errno)));
    return st;
  }
  struct stat sb;
  if (::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != ::geteuid() ||
      (sb.st_mode & 077) != 0) {
    ::close(fd);
    return absl::PermissionDeniedError(absl::StrCat(
        "journal ", path, " is not a regular file of this user with mode 0600; refusing it"));
  }
  std::string bytes;
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return absl::InternalError(absl::StrCat("read ", path, ": ", std::strerror(errno)));
    }
    if (n == 0) break;
    bytes.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return bytes;
}

}  // namespace

std::string JournalPath(const std::string& dist_file) { return dist_file + ".journal"; }

Journal::Journal(std::string path, int fd, Log log)
    : path_(std::move(path)), fd_(fd), log_(std::move(log)) {
  // The syncer never takes a process signal (a thread inherits its creator's mask): the
  // coordinator handles them on its signal watcher's thread, which may start later.
  sigset_t all;
  sigset_t before;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &before);
  syncer_ = std::thread([this] { SyncLoop(); });
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

Journal::~Journal() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    work_.Signal();
  }
  syncer_.join();
  ::close(fd_);
}

absl::StatusOr<std::unique_ptr<Journal>> Journal::Create(const std::string& path,
                                                         const JournalHeader& header, Log log) {
  ::unlink(path.c_str());  // a leftover of an earlier job (never followed: O_EXCL below)
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot create journal ", path, ": ", std::strerror(errno)));
  }
  const std::string head = FrameRecord(HeaderRecord(header)) + FrameRecord(IncarnationRecord(0));
  absl::Status st = WriteAll(fd, head);
  if (st.ok() && ::fdatasync(fd) != 0) st = absl::InternalError(std::strerror(errno));
  if (st.ok()) st = SyncDirectoryOf(path);
  if (!st.ok()) {
    ::close(fd);
    return absl::InternalError(absl::StrCat("cannot write journal ", path, ": ", st.message()));
  }
  return std::unique_ptr<Journal>(new Journal(path, fd, std::move(log)));
}

absl::StatusOr<std::unique_ptr<Journal>> Journal::Resume(const std::string& path,
                                                         const JournalHeader& expected, Log log,
                                                         JournalState* state) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadAll(path));
  absl::StatusOr<JournalState> read = ParseJournal(bytes);
  if (!read.ok()) {
    return absl::Status(read.status().code(),
                        absl::StrCat("journal ", path, ": ", read.status().message()));
  }
  const JournalHeader& h = read->header;
  if (h.job_id != expected.job_id || h.generation != expected.generation ||
      h.nonce != expected.nonce) {
    return absl::FailedPreconditionError(
        absl::StrCat("journal ", path, " belongs to job ", h.job_id, " generation ", h.generation,
                     " nonce ", h.nonce, ", not to the dist_file's job ", expected.job_id,
                     " generation ", expected.generation, " nonce ", expected.nonce));
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot open journal ", path, ": ", std::strerror(errno)));
  }
  const off_t valid = static_cast<off_t>(bytes.size()) - static_cast<off_t>(read->torn_bytes);
  absl::Status st;
  if (read->torn_bytes > 0 && ::ftruncate(fd, valid) != 0) {
    st = absl::InternalError(absl::StrCat("truncate: ", std::strerror(errno)));
  }
  ++read->incarnation;
  if (st.ok()) st = WriteAll(fd, FrameRecord(IncarnationRecord(read->incarnation)));
  if (st.ok() && ::fdatasync(fd) != 0) st = absl::InternalError(std::strerror(errno));
  if (!st.ok()) {
    ::close(fd);
    return absl::InternalError(absl::StrCat("cannot append to journal ", path, ": ", st.message()));
  }
  *state = std::move(*read);
  return std::unique_ptr<Journal>(new Journal(path, fd, std::move(log)));
}

void Journal::Append(const std::string& payload) {
  const std::string frame = FrameRecord(payload);
  absl::MutexLock lock(&mu_);
  if (!failed_.ok()) return;
  absl::Status st = WriteAll(fd_, frame);
  if (!st.ok()) {
    // A journal with a hole would restore a wrong state: remove it, so that a restart is refused.
    failed_ = st;
    ::unlink(path_.c_str());
    if (log_) {
      log_(absl::StrCat("journal ", path_, " failed (", st.message(),
                        "); removed it: this coordinator can no longer be restarted"));
    }
    return;
  }
  ++appended_;
  work_.Signal();
}

void Journal::SyncLoop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    while (!stopping_ && appended_ == synced_) work_.Wait(&mu_);
    if (appended_ == synced_) return;  // stopping, and everything is synced
    const int64_t target = appended_;
    mu_.Unlock();
    // Every record appended while this runs waits for the next one: one fsync per batch.
    const int rc = ::fdatasync(fd_);
    const int err = errno;
    mu_.Lock();
    ++fsyncs_;
    if (rc != 0 && failed_.ok()) {
      failed_ = absl::InternalError(absl::StrCat("fdatasync: ", std::strerror(err)));
      if (log_) log_(absl::StrCat("journal ", path_, ": ", failed_.message()));
    }
    synced_ = target;
    synced_cv_.SignalAll();
  }
}

absl::Status Journal::Sync() {
  absl::MutexLock lock(&mu_);
  const int64_t target = appended_;
  while (synced_ < target && failed_.ok()) synced_cv_.Wait(&mu_);
  return failed_;
}

int64_t Journal::appended() const {
  absl::MutexLock lock(&mu_);
  return appended_;
}

int64_t Journal::fsyncs() const {
  absl::MutexLock lock(&mu_);
  return fsyncs_;
}

void Journal::Registered(const WorkerIdentity& who) { Append(RegisteredRecord(who)); }

void Journal::GenerationFormed(const RankTable& table, int restarts) {
  Append(GenerationRecord(table, restarts));
}

void Journal::CheckpointCommitted(const CommittedCheckpoint& checkpoint) {
  Append(CheckpointRecord(checkpoint));
}

void Journal::EpochAgreed(int64_t epoch, const ShardRequest& request) {
  Append(EpochRecord(epoch, request));
}

void Journal::StopRequested(const std::string& reason) { Append(StopRecord(reason)); }

}  // namespace ddp
