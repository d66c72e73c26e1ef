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
#include "common/crc32c.h"
#include "common/status_macros.h"

namespace ddp {
namespace {

enum class RecordType : uint8_t {
  kHeader = 1,
  kIncarnation = 2,
  kRegistered = 3,
  kGeneration = 4,
  kCheckpoint = 5,
  kEpoch = 6,
  kStop = 7,
};

constexpr size_t kFrameBytes = 8;                       // length + CRC
constexpr uint32_t kMaxRecordBytes = 64 * 1024 * 1024;  // a rank table of 65536 long host names
constexpr uint32_t kCrcMaskDelta = 0xa282ead8u;         // LevelDB's mask: CRCs of CRCs differ

uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kCrcMaskDelta; }

// --- encoding ---------------------------------------------------------------------------------
void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutI64(std::string* out, int64_t v) {
  const uint64_t u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}
void PutString(std::string* out, const std::string& s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}
void PutWorker(std::string* out, const WorkerIdentity& w) {
  PutString(out, w.host);
  PutI64(out, w.node_rank);
  PutI64(out, w.local_rank);
  PutI64(out, w.local_world_size);
  PutI64(out, w.pid);
  PutString(out, w.nonce);
}
std::string Start(RecordType type) { return std::string(1, static_cast<char>(type)); }

// --- decoding ---------------------------------------------------------------------------------
class Reader {
 public:
  explicit Reader(absl::string_view data) : data_(data) {}
  bool U32(uint32_t* v) {
    if (data_.size() < 4) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i)
      *v |= static_cast<uint32_t>(static_cast<uint8_t>(data_[i])) << (8 * i);
    data_.remove_prefix(4);
    return true;
  }
  bool I64(int64_t* v) {
    if (data_.size() < 8) return false;
    uint64_t u = 0;
    for (int i = 0; i < 8; ++i)
      u |= static_cast<uint64_t>(static_cast<uint8_t>(data_[i])) << (8 * i);
    data_.remove_prefix(8);
    *v = static_cast<int64_t>(u);
    return true;
  }
  bool Int(int* v) {
    int64_t w = 0;
    if (!I64(&w) || w < INT32_MIN || w > INT32_MAX) return false;
    *v = static_cast<int>(w);
    return true;
  }
  bool String(std::string* s) {
    uint32_t n = 0;
    if (!U32(&n) || data_.size() < n) return false;
    s->assign(data_.data(), n);
    data_.remove_prefix(n);
    return true;
  }
  bool Worker(WorkerIdentity* w) {
    return String(&w->host) && Int(&w->node_rank) && Int(&w->local_rank) &&
           Int(&w->local_world_size) && Int(&w->pid) && String(&w->nonce);
  }
  bool done() const { return data_.empty(); }

 private:
  absl::string_view data_;
};

// Applies one record's payload to `state`; false when it does not parse.
bool Apply(absl::string_view payload, bool first, JournalState* state) {
  if (payload.empty()) return false;
  const auto type = static_cast<RecordType>(payload[0]);
  Reader r(payload.substr(1));
  if (first != (type == RecordType::kHeader)) return false;
  bool ok = false;
  switch (type) {
    case RecordType::kHeader: {
      JournalHeader& h = state->header;
      ok = r.String(&h.job_id) && r.I64(&h.generation) && r.String(&h.nonce) &&
           r.String(&h.token) && r.String(&h.view_token) && r.String(&h.control_token) &&
           r.Int(&h.world_size);
      break;
    }
    case RecordType::kIncarnation:
      ok = r.I64(&state->incarnation);
      break;
    case RecordType::kRegistered: {
      WorkerIdentity w;
      ok = r.Worker(&w);
      if (ok) state->registered.push_back(std::move(w));
      break;
    }
    case RecordType::kGeneration: {
      RankTable t;
      int64_t n = 0;
      ok = r.I64(&t.generation) && r.String(&t.store_prefix) && r.Int(&t.num_nodes) &&
           r.Int(&state->restarts) && r.I64(&n) && n >= 0 && n <= kMaxRecordBytes;
      for (int64_t i = 0; ok && i < n; ++i) {
        WorkerIdentity w;
        ok = r.Worker(&w);
        t.ranks.push_back(std::move(w));
      }
      if (ok) {
        state->table = std::move(t);
        state->epochs.clear();  // a new generation agrees on its epochs afresh
      }
      break;
    }
    case RecordType::kCheckpoint: {
      CommittedCheckpoint c;
      ok = r.I64(&c.epoch) && r.I64(&c.step) && r.I64(&c.consumed) && r.String(&c.path);
      if (ok) state->checkpoint = std::move(c);
      break;
    }
    case RecordType::kEpoch: {
      int64_t epoch = 0;
      ShardRequest q;
      int64_t shuffle = 0;
      int64_t drop_last = 0;
      ok = r.I64(&epoch) && r.I64(&q.epoch) && r.I64(&q.dataset_size) && r.I64(&q.seed) &&
           r.I64(&shuffle) && r.I64(&drop_last) && r.I64(&q.resume_consumed) &&
           r.Int(&q.resume_world_size);
      q.shuffle = shuffle != 0;
      q.drop_last = drop_last != 0;
      if (ok) state->epochs[epoch] = q;
      break;
    }
    case RecordType::kStop: {
      std::string reason;
      ok = r.String(&reason);
      if (ok) state->stop_reason = std::move(reason);
      break;
    }
  }
  return ok && r.done();
}

std::string HeaderPayload(const JournalHeader& h) {
  std::string p = Start(RecordType::kHeader);
  PutString(&p, h.job_id);
  PutI64(&p, h.generation);
  PutString(&p, h.nonce);
  PutString(&p, h.token);
  PutString(&p, h.view_token);
  PutString(&p, h.control_token);
  PutI64(&p, h.world_size);
  return p;
}

std::string IncarnationPayload(int64_t incarnation) {
  std::string p = Start(RecordType::kIncarnation);
  PutI64(&p, incarnation);
  return p;
}

std::string Frame(const std::string& payload) {
  std::string out;
  out.reserve(kFrameBytes + payload.size());
  PutU32(&out, static_cast<uint32_t>(payload.size()));
  PutU32(&out, MaskCrc(Crc32c(payload)));
  out.append(payload);
  return out;
}

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

absl::StatusOr<JournalState> ParseJournal(const std::string& bytes) {
  JournalState state;
  size_t pos = 0;
  while (pos < bytes.size()) {
    Reader frame(absl::string_view(bytes).substr(pos));
    uint32_t length = 0;
    uint32_t crc = 0;
    const bool whole = frame.U32(&length) && frame.U32(&crc) && length <= kMaxRecordBytes &&
                       bytes.size() - pos - kFrameBytes >= length;
    const bool checks =
        whole && MaskCrc(Crc32c(absl::string_view(bytes).substr(pos + kFrameBytes, length))) == crc;
    const size_t end = whole ? pos + kFrameBytes + length : bytes.size();
    if (!checks) {
      if (end == bytes.size()) {  // the last frame: torn by a crash mid-append
        state.torn_bytes = static_cast<int64_t>(bytes.size() - pos);
        break;
      }
      return absl::DataLossError(absl::StrCat("journal record ", state.records + 1, " at byte ",
                                              pos, " is corrupt (checksum mismatch)"));
    }
    if (!Apply(absl::string_view(bytes).substr(pos + kFrameBytes, length), state.records == 0,
               &state)) {
      return absl::DataLossError(
          absl::StrCat("journal record ", state.records + 1, " at byte ", pos,
                       state.records == 0 ? " is not a journal header" : " does not parse"));
    }
    ++state.records;
    pos = end;
  }
  if (state.records == 0) return absl::DataLossError("journal has no header record");
  return state;
}

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
  const std::string head = Frame(HeaderPayload(header)) + Frame(IncarnationPayload(0));
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
  if (st.ok()) st = WriteAll(fd, Frame(IncarnationPayload(read->incarnation)));
  if (st.ok() && ::fdatasync(fd) != 0) st = absl::InternalError(std::strerror(errno));
  if (!st.ok()) {
    ::close(fd);
    return absl::InternalError(absl::StrCat("cannot append to journal ", path, ": ", st.message()));
  }
  *state = std::move(*read);
  return std::unique_ptr<Journal>(new Journal(path, fd, std::move(log)));
}

void Journal::Append(const std::string& payload) {
  const std::string frame = Frame(payload);
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

void Journal::Registered(const WorkerIdentity& who) {
  std::string p = Start(RecordType::kRegistered);
  PutWorker(&p, who);
  Append(p);
}

void Journal::GenerationFormed(const RankTable& table, int restarts) {
  std::string p = Start(RecordType::kGeneration);
  PutI64(&p, table.generation);
  PutString(&p, table.store_prefix);
  PutI64(&p, table.num_nodes);
  PutI64(&p, restarts);
  PutI64(&p, table.size());
  for (const WorkerIdentity& w : table.ranks) PutWorker(&p, w);
  Append(p);
}

void Journal::CheckpointCommitted(const CommittedCheckpoint& c) {
  std::string p = Start(RecordType::kCheckpoint);
  PutI64(&p, c.epoch);
  PutI64(&p, c.step);
  PutI64(&p, c.consumed);
  PutString(&p, c.path);
  Append(p);
}

void Journal::EpochAgreed(int64_t epoch, const ShardRequest& q) {
  std::string p = Start(RecordType::kEpoch);
  PutI64(&p, epoch);
  PutI64(&p, q.epoch);
  PutI64(&p, q.dataset_size);
  PutI64(&p, q.seed);
  PutI64(&p, q.shuffle ? 1 : 0);
  PutI64(&p, q.drop_last ? 1 : 0);
  PutI64(&p, q.resume_consumed);
  PutI64(&p, q.resume_world_size);
  Append(p);
}

void Journal::StopRequested(const std::string& reason) {
  std::string p = Start(RecordType::kStop);
  PutString(&p, reason);
  Append(p);
}

}  // namespace ddp
