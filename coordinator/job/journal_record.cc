#include "coordinator/job/journal_record.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"

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
  kDone = 8,
  kFailed = 9,
};
constexpr RecordType kLastRecordType = RecordType::kFailed;

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
      if (ok && !r.done()) ok = r.String(&h.tls_key) && r.String(&h.tls_cert);
      break;
    }
    case RecordType::kIncarnation:
      ok = r.I64(&state->incarnation) && state->incarnation >= 0 &&
           state->incarnation < INT64_MAX;  // Resume appends the next one
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
    case RecordType::kDone: {
      int rank = 0;
      FinishedRank f;
      int64_t stopped = 0;
      ok = r.Int(&rank) && rank >= 0 && r.Int(&f.pid) && r.I64(&stopped) &&
           (stopped == 0 || stopped == 1);
      f.stopped = stopped != 0;
      if (ok) state->finished[rank] = f;
      break;
    }
    case RecordType::kFailed: {
      FailureCause c;
      int64_t kind = 0;
      ok = r.Int(&c.rank) && r.I64(&kind) && r.String(&c.text);
      ok = ok &&
           std::any_of(std::begin(kAllFailureKinds), std::end(kAllFailureKinds),
                       [&](FailureKind k) { return static_cast<int64_t>(k) == kind; }) &&
           kind != static_cast<int64_t>(FailureKind::kNone);
      c.kind = static_cast<FailureKind>(kind);
      if (ok) state->failure = std::move(c);
      break;
    }
    default:
      return false;
  }
  return ok && r.done();
}

// The payload length of a frame that checks (whole, CRC matches) at `pos`; nullopt otherwise.
std::optional<size_t> ValidFrameAt(absl::string_view bytes, size_t pos) {
  if (pos > bytes.size() || bytes.size() - pos < kFrameBytes) return std::nullopt;
  Reader frame(bytes.substr(pos, kFrameBytes));
  uint32_t length = 0;
  uint32_t crc = 0;
  if (!frame.U32(&length) || !frame.U32(&crc) || length > kMaxRecordBytes ||
      bytes.size() - pos - kFrameBytes < length) {
    return std::nullopt;
  }
  if (MaskCrc(Crc32c(bytes.substr(pos + kFrameBytes, length))) != crc) return std::nullopt;
  return length;
}

// The frame at `pos` does not check. A torn tail is what one interrupted append leaves: a prefix
// of the last frame (a short header, or a length that runs past the end with nothing valid
// after it), a last frame whose bytes never reached the disk (zeros, or a whole last frame whose
// checksum fails). OK with a description for a torn tail; otherwise the damage, as the error.
absl::StatusOr<std::string> JudgeBadFrame(absl::string_view bytes, size_t pos) {
  const absl::string_view rest = bytes.substr(pos);
  if (rest.find_first_not_of('\0') == absl::string_view::npos) return std::string("zeros");
  if (rest.size() < kFrameBytes) return std::string("a short frame header");
  Reader frame(rest);
  uint32_t length = 0;
  uint32_t crc = 0;
  frame.U32(&length);
  frame.U32(&crc);
  if (length > kMaxRecordBytes) {
    return absl::DataLossError(
        absl::StrCat("its length field says ", length, " bytes, more than any record holds"));
  }
  if (rest.size() - kFrameBytes >= length) {  // the frame is whole: its checksum fails
    if (rest.size() - kFrameBytes == length) return std::string("a last frame that never landed");
    return absl::DataLossError(absl::StrCat(
        "checksum mismatch, and ", rest.size() - kFrameBytes - length, " bytes follow it"));
  }
  // The length runs past the end of the file: torn only when nothing valid follows (an append
  // cut short holds no whole frame after its own start). The search is bounded: a frame whose
  // type byte is unknown is not checksummed, and the checksummed bytes have a budget.
  size_t budget = 64 * rest.size() + (size_t{1} << 20);
  for (size_t q = pos + 1; q + kFrameBytes < bytes.size(); ++q) {
    Reader at(bytes.substr(q, kFrameBytes));
    uint32_t n = 0;
    at.U32(&n);
    if (n == 0 || n > kMaxRecordBytes || bytes.size() - q - kFrameBytes < n) continue;
    const uint8_t type = static_cast<uint8_t>(bytes[q + kFrameBytes]);
    if (type < static_cast<uint8_t>(RecordType::kHeader) ||
        type > static_cast<uint8_t>(kLastRecordType)) {
      continue;
    }
    if (n > budget) {
      return absl::DataLossError(absl::StrCat("its length field says ", length,
                                              " bytes, past the "
                                              "end of the file, and what follows is too large to "
                                              "tell from a torn tail"));
    }
    budget -= n;
    if (ValidFrameAt(bytes, q)) {
      return absl::DataLossError(absl::StrCat("its length field says ", length,
                                              " bytes, past the end of the file, but a valid "
                                              "record follows at byte ",
                                              q));
    }
  }
  return std::string("a last frame cut short");
}

}  // namespace

std::string HeaderRecord(const JournalHeader& h) {
  std::string p = Start(RecordType::kHeader);
  PutString(&p, h.job_id);
  PutI64(&p, h.generation);
  PutString(&p, h.nonce);
  PutString(&p, h.token);
  PutString(&p, h.view_token);
  PutString(&p, h.control_token);
  PutI64(&p, h.world_size);
  PutString(&p, h.tls_key);
  PutString(&p, h.tls_cert);
  return p;
}

std::string IncarnationRecord(int64_t incarnation) {
  std::string p = Start(RecordType::kIncarnation);
  PutI64(&p, incarnation);
  return p;
}

std::string FrameRecord(const std::string& payload) {
  std::string out;
  out.reserve(kFrameBytes + payload.size());
  PutU32(&out, static_cast<uint32_t>(payload.size()));
  PutU32(&out, MaskCrc(Crc32c(payload)));
  out.append(payload);
  return out;
}

std::string RegisteredRecord(const WorkerIdentity& who) {
  std::string p = Start(RecordType::kRegistered);
  PutWorker(&p, who);
  return p;
}

std::string GenerationRecord(const RankTable& table, int restarts) {
  std::string p = Start(RecordType::kGeneration);
  PutI64(&p, table.generation);
  PutString(&p, table.store_prefix);
  PutI64(&p, table.num_nodes);
  PutI64(&p, restarts);
  PutI64(&p, table.size());
  for (const WorkerIdentity& w : table.ranks) PutWorker(&p, w);
  return p;
}

std::string CheckpointRecord(const CommittedCheckpoint& c) {
  std::string p = Start(RecordType::kCheckpoint);
  PutI64(&p, c.epoch);
  PutI64(&p, c.step);
  PutI64(&p, c.consumed);
  PutString(&p, c.path);
  return p;
}

std::string EpochRecord(int64_t epoch, const ShardRequest& q) {
  std::string p = Start(RecordType::kEpoch);
  PutI64(&p, epoch);
  PutI64(&p, q.epoch);
  PutI64(&p, q.dataset_size);
  PutI64(&p, q.seed);
  PutI64(&p, q.shuffle ? 1 : 0);
  PutI64(&p, q.drop_last ? 1 : 0);
  PutI64(&p, q.resume_consumed);
  PutI64(&p, q.resume_world_size);
  return p;
}

std::string DoneRecord(int rank, int pid, bool stopped) {
  std::string p = Start(RecordType::kDone);
  PutI64(&p, rank);
  PutI64(&p, pid);
  PutI64(&p, stopped ? 1 : 0);
  return p;
}

std::string FailedRecord(const FailureCause& cause) {
  std::string p = Start(RecordType::kFailed);
  PutI64(&p, cause.rank);
  PutI64(&p, static_cast<int64_t>(cause.kind));
  PutString(&p, cause.text);
  return p;
}

std::string StopRecord(const std::string& reason) {
  std::string p = Start(RecordType::kStop);
  PutString(&p, reason);
  return p;
}

absl::StatusOr<JournalState> ParseJournal(const std::string& bytes) {
  JournalState state;
  const absl::string_view all(bytes);
  size_t pos = 0;
  while (pos < all.size()) {
    const std::optional<size_t> length = ValidFrameAt(all, pos);
    if (!length) {
      absl::StatusOr<std::string> damage = JudgeBadFrame(all, pos);
      if (damage.ok()) {  // the last frame, torn by a crash mid-append
        state.torn_bytes = static_cast<int64_t>(all.size() - pos);
        break;
      }
      return absl::DataLossError(absl::StrCat("journal record ", state.records + 1, " at byte ",
                                              pos, " is corrupt (", damage.status().message(),
                                              "); not a torn tail, refusing the journal"));
    }
    if (!Apply(all.substr(pos + kFrameBytes, *length), state.records == 0, &state)) {
      return absl::DataLossError(
          absl::StrCat("journal record ", state.records + 1, " at byte ", pos,
                       state.records == 0 ? " is not a journal header" : " does not parse"));
    }
    ++state.records;
    pos += kFrameBytes + *length;
  }
  if (state.records == 0) return absl::DataLossError("journal has no header record");
  return state;
}

}  // namespace ddp
