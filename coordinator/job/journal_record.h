// The journal's record format (journal.h writes and reads the file): each record's payload is a
// type byte and its fields (integers as 64-bit little endian, strings as a u32 length and the
// bytes); ParseJournal applies the records in order to a JournalState.
//
// Framing: each record is [u32 length][u32 masked CRC-32C of the payload][payload], little
// endian. Reading stops at the first frame that does not check. It is a torn tail, dropped (and
// the file cut back once the journal's job is confirmed), only when it is what one interrupted
// append leaves: a short frame header, zeros to the end, a whole last frame whose checksum
// fails, or a length that runs past the end of the file with no valid frame after its start.
// Anything else (a length larger than any record, a bad frame followed by more bytes, a length
// past the end while a valid frame follows) is corruption in the middle: refused (DATA_LOSS)
// with the byte offset of the bad frame, and nothing is cut. A journal of another job is
// refused too (FAILED_PRECONDITION when its header does not match the dist_file).
//
// Thread safety: pure functions.
#ifndef SLURM_DDP_COORDINATOR_JOB_JOURNAL_RECORD_H_
#define SLURM_DDP_COORDINATOR_JOB_JOURNAL_RECORD_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/coordinator_api.h"
#include "common/failure_cause.h"
#include "coordinator/job/membership.h"

namespace ddp {

// The job identity a journal belongs to: what the dist_file and authentication need.
struct JournalHeader {
  std::string job_id;
  int64_t generation = 0;  // Slurm restart count
  std::string nonce;
  std::string token;
  std::string view_token;
  std::string control_token;
  int world_size = 0;
  // The coordinator's TLS identity (PEM), so that a restarted coordinator serves the certificate
  // its clients pin. Appended last on the record; a header without them (an older journal) reads
  // as empty. The braces keep shorter aggregate initializations free of warnings.
  std::string tls_key{};
  std::string tls_cert{};
};

// A rank that reported its end (ReportDone): finished (done) or checkpointed and stopped.
struct FinishedRank {
  int pid = 0;  // the worker that reported it: restored only onto the same worker's rank
  bool stopped = false;
};

// The state a journal restores.
struct JournalState {
  JournalHeader header;
  int64_t incarnation = 0;                 // the highest incarnation recorded
  std::vector<WorkerIdentity> registered;  // before the first rank table, in order
  std::optional<RankTable> table;          // the last complete membership generation
  int restarts = 0;                        // in-job recovery restarts used (with `table`)
  std::optional<CommittedCheckpoint> checkpoint;
  std::map<int64_t, ShardRequest> epochs;  // agreed in the last generation
  std::optional<std::string> stop_reason;  // a graceful stop was asked for
  std::map<int, FinishedRank> finished;    // by rank: ranks that reported their end
  std::optional<FailureCause> failure;     // the job failed (the last cause recorded)
  int64_t records = 0;
  int64_t torn_bytes = 0;  // dropped from the tail (a crash mid-append)
};

// The payload of each record type (unframed): what each JournalSink call appends.
std::string HeaderRecord(const JournalHeader& header);
std::string IncarnationRecord(int64_t incarnation);
std::string RegisteredRecord(const WorkerIdentity& who);
std::string GenerationRecord(const RankTable& table, int restarts);
std::string CheckpointRecord(const CommittedCheckpoint& checkpoint);
std::string EpochRecord(int64_t epoch, const ShardRequest& request);
std::string StopRecord(const std::string& reason);
std::string DoneRecord(int rank, int pid, bool stopped);
std::string FailedRecord(const FailureCause& cause);

// The frame around a payload: [u32 length][u32 masked CRC-32C of the payload][payload].
std::string FrameRecord(const std::string& payload);

// Parses journal bytes. DATA_LOSS for a corrupt record that is not the tail, or a journal
// without its header; a torn tail is dropped (counted in torn_bytes).
absl::StatusOr<JournalState> ParseJournal(const std::string& bytes);

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_JOURNAL_RECORD_H_
