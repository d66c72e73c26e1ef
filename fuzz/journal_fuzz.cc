// Fuzzes the journal parser (coordinator/job/journal_record.h), what a restarted coordinator
// reads from disk. Invariants: a refusal is one DATA_LOSS line that names the byte offset of the
// bad frame (unless there is no header at all); an accepted journal has a header first, drops at
// most its tail, and its kept prefix reads again the same with nothing torn, also followed by a
// new incarnation record (what Journal::Resume appends after cutting the tail).
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "coordinator/job/journal_record.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<ddp::JournalState> parsed = ddp::ParseJournal(bytes);
  if (!parsed.ok()) {
    const std::string message(parsed.status().message());
    FUZZ_CHECK(absl::IsDataLoss(parsed.status()), parsed.status().ToString());
    FUZZ_CHECK(!message.empty() && message.find('\n') == std::string::npos, message);
    FUZZ_CHECK(
        message == "journal has no header record" || message.find(" at byte ") != std::string::npos,
        message);
    return 0;
  }
  const ddp::JournalState& s = *parsed;
  FUZZ_CHECK(s.records >= 1, "a journal without records accepted");
  FUZZ_CHECK(s.torn_bytes >= 0 && static_cast<size_t>(s.torn_bytes) < size + 1,
             std::to_string(s.torn_bytes));
  FUZZ_CHECK(s.incarnation >= 0, std::to_string(s.incarnation));
  const std::string kept = bytes.substr(0, size - static_cast<size_t>(s.torn_bytes));
  const absl::StatusOr<ddp::JournalState> again = ddp::ParseJournal(kept);
  FUZZ_CHECK(again.ok(), again.status().ToString());
  FUZZ_CHECK(again->torn_bytes == 0, "the kept prefix has a torn tail");
  FUZZ_CHECK(again->records == s.records, "the kept prefix reads differently");
  FUZZ_CHECK(again->finished.size() == s.finished.size(), "finished ranks differ");
  const absl::StatusOr<ddp::JournalState> resumed =
      ddp::ParseJournal(kept + ddp::FrameRecord(ddp::IncarnationRecord(s.incarnation + 1)));
  FUZZ_CHECK(resumed.ok(), resumed.status().ToString());
  FUZZ_CHECK(resumed->records == s.records + 1 && resumed->incarnation == s.incarnation + 1,
             "the resumed journal does not read its new incarnation");
  return 0;
}
