#include "coordinator/job/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/signal_free_thread.h"
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

// What the writer and syncer threads share with the Journal object. Held by shared_ptr: a file
// system stuck past kCloseTimeout at close keeps the threads (detached) and this alive, never a
// destroyed Journal.
struct Journal::Shared {
  Shared(std::string path, int fd, Journal::Log log)
      : path(std::move(path)), fd(fd), log(std::move(log)) {}
  ~Shared() { ::close(fd); }

  const std::string path;
  const int fd;
  const Journal::Log log;
  absl::Mutex mu;
  std::string queue ABSL_GUARDED_BY(mu);  // framed records not yet handed to the writer
  int64_t appended ABSL_GUARDED_BY(mu) = 0;
  int64_t queued ABSL_GUARDED_BY(mu) = 0;   // records in `queue`
  int64_t written ABSL_GUARDED_BY(mu) = 0;  // records written to the file
  int64_t synced ABSL_GUARDED_BY(mu) = 0;   // records fsynced
  int64_t fsyncs ABSL_GUARDED_BY(mu) = 0;
  int64_t dropped ABSL_GUARDED_BY(mu) = 0;
  absl::Time write_since ABSL_GUARDED_BY(mu) = absl::InfiniteFuture();  // a write in flight
  absl::Time sync_since ABSL_GUARDED_BY(mu) = absl::InfiniteFuture();   // an fdatasync in flight
  bool stopping ABSL_GUARDED_BY(mu) = false;
  int threads_running ABSL_GUARDED_BY(mu) = 2;
  absl::Status failed ABSL_GUARDED_BY(mu);
  absl::Duration stuck_after ABSL_GUARDED_BY(mu) = Journal::kStuckAfter;

  // The first failure fails the journal for good: later records are dropped (a journal with a
  // hole would restore a wrong state), and the file is removed so that a restart is refused.
  void FailLocked(const std::string& what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (!failed.ok()) return;
    failed = absl::InternalError(what);
    dropped += queued;
    queued = 0;
    queue.clear();
    const bool removed = ::unlink(path.c_str()) == 0 || errno == ENOENT;
    if (log) {
      log(absl::StrCat("journal ", path, " failed (", what, "); ",
                       removed ? "removed it" : "could not remove it either",
                       ": records are no longer kept and this coordinator can no longer be "
                       "restarted from its journal"));
    }
  }

  void WriteLoop() {
    absl::MutexLock lock(&mu);
    while (true) {
      mu.Await(absl::Condition(
          +[](Shared* s) ABSL_NO_THREAD_SAFETY_ANALYSIS { return s->stopping || s->queued > 0; },
          this));
      if (queued == 0) break;  // stopping, and nothing left
      std::string batch;
      batch.swap(queue);
      const int64_t n = queued;
      queued = 0;
      write_since = absl::Now();
      mu.Unlock();
      const absl::Status st = WriteAll(fd, batch);
      mu.Lock();
      write_since = absl::InfiniteFuture();
      if (!st.ok()) {
        dropped += n;
        FailLocked(std::string(st.message()));
      } else if (failed.ok()) {
        written += n;
      }
    }
    --threads_running;
  }

  void SyncLoop() {
    absl::MutexLock lock(&mu);
    while (true) {
      mu.Await(absl::Condition(
          +[](Shared* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return s->written > s->synced ||
                   (s->stopping && s->queued == 0 && s->write_since == absl::InfiniteFuture());
          },
          this));
      if (written == synced) break;  // stopping, and everything written is synced
      const int64_t target = written;
      sync_since = absl::Now();
      mu.Unlock();
      // Every record written while this runs waits for the next one: one fsync per batch.
      const int rc = ::fdatasync(fd);
      const int err = errno;
      mu.Lock();
      sync_since = absl::InfiniteFuture();
      ++fsyncs;
      if (rc != 0) FailLocked(absl::StrCat("fdatasync: ", std::strerror(err)));
      synced = target;
    }
    --threads_running;
  }
};

Journal::Journal(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {
  // The threads never take a process signal (a thread inherits its creator's mask): the
  // coordinator handles them on its signal watcher's thread, which may start later.
  SignalFreeThread([s = shared_] { s->WriteLoop(); }).detach();
  SignalFreeThread([s = shared_] { s->SyncLoop(); }).detach();
}

Journal::~Journal() {
  Shared* s = shared_.get();
  absl::MutexLock lock(&s->mu);
  s->stopping = true;
  const bool ended = s->mu.AwaitWithTimeout(
      absl::Condition(
          +[](Shared* x) ABSL_NO_THREAD_SAFETY_ANALYSIS { return x->threads_running == 0; }, s),
      kCloseTimeout);
  if (!ended && s->log) {
    s->log(absl::StrCat("journal ", s->path, ": a write or fdatasync has not returned for ",
                        absl::FormatDuration(kCloseTimeout), "; closing without it"));
  }
}

absl::StatusOr<std::unique_ptr<Journal>> Journal::Create(const std::string& path,
                                                         const JournalHeader& header, Log log) {
  ::unlink(path.c_str());  // a dead job's leftover (never followed: O_EXCL below)
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
  return std::unique_ptr<Journal>(new Journal(std::make_shared<Shared>(path, fd, std::move(log))));
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
  // Every check before anything is cut or appended: a refused journal stays as it was.
  const JournalHeader& h = read->header;
  if (h.job_id != expected.job_id || h.generation != expected.generation ||
      h.nonce != expected.nonce) {
    return absl::FailedPreconditionError(
        absl::StrCat("journal ", path, " belongs to job ", h.job_id, " generation ", h.generation,
                     " nonce ", h.nonce, ", not to the dist_file's job ", expected.job_id,
                     " generation ", expected.generation, " nonce ", expected.nonce));
  }
  if (h.token != expected.token || h.view_token != expected.view_token ||
      h.control_token != expected.control_token) {
    return absl::FailedPreconditionError(
        absl::StrCat("journal ", path, " does not hold the dist_file's tokens"));
  }
  if (expected.world_size > 0 && h.world_size != expected.world_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        "journal ", path, " is of a job of ", h.world_size, " workers, not ", expected.world_size));
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
  return std::unique_ptr<Journal>(new Journal(std::make_shared<Shared>(path, fd, std::move(log))));
}

void Journal::Append(const std::string& payload) {
  std::string frame = FrameRecord(payload);
  Shared* s = shared_.get();
  absl::MutexLock lock(&s->mu);
  ++s->appended;
  if (!s->failed.ok()) {
    ++s->dropped;
    return;
  }
  s->queue += frame;
  ++s->queued;
}

absl::Status Journal::Sync(absl::Duration timeout) {
  Shared* s = shared_.get();
  absl::MutexLock lock(&s->mu);
  const int64_t target = s->appended - s->dropped;
  struct Done {
    Shared* s;
    int64_t target;
    bool operator()() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return s->synced >= target || !s->failed.ok();
    }
  } done{s, target};
  if (!s->mu.AwaitWithTimeout(absl::Condition(&done), timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("journal ", s->path, ": not synced within ", absl::FormatDuration(timeout)));
  }
  return s->failed;
}

void Journal::AwaitWritten(absl::Duration max) {
  Shared* s = shared_.get();
  absl::MutexLock lock(&s->mu);
  if (s->write_since != absl::InfiniteFuture() && absl::Now() - s->write_since >= max) return;
  const int64_t target = s->appended - s->dropped;
  struct Written {
    Shared* s;
    int64_t target;
    bool operator()() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return s->written >= target || !s->failed.ok();
    }
  } written{s, target};
  s->mu.AwaitWithTimeout(absl::Condition(&written), max);
}

JournalHealth Journal::Health() const {
  Shared* s = shared_.get();
  absl::MutexLock lock(&s->mu);
  JournalHealth h;
  h.records = s->appended;
  h.dropped = s->dropped;
  h.pending = s->appended - s->dropped - s->synced;
  if (!s->failed.ok()) {
    h.state = JournalCondition::kFailed;
    h.error = std::string(s->failed.message());
    h.pending = 0;
    return h;
  }
  const absl::Time since = std::min(s->write_since, s->sync_since);
  const absl::Duration age =
      since == absl::InfiniteFuture() ? absl::ZeroDuration() : absl::Now() - since;
  h.state = age >= s->stuck_after ? JournalCondition::kStuck : JournalCondition::kOk;
  h.stuck_seconds = h.state == JournalCondition::kStuck ? absl::ToDoubleSeconds(age) : 0.0;
  return h;
}

int64_t Journal::appended() const {
  absl::MutexLock lock(&shared_->mu);
  return shared_->appended;
}

int64_t Journal::fsyncs() const {
  absl::MutexLock lock(&shared_->mu);
  return shared_->fsyncs;
}

const std::string& Journal::path() const { return shared_->path; }

void Journal::set_stuck_after(absl::Duration d) {
  absl::MutexLock lock(&shared_->mu);
  shared_->stuck_after = d;
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

void Journal::RankFinished(int rank, int pid, bool stopped) {
  Append(DoneRecord(rank, pid, stopped));
}

void Journal::JobFailed(const FailureCause& cause) { Append(FailedRecord(cause)); }

}  // namespace ddp
