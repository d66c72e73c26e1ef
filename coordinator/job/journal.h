// The coordinator's append-only journal, `<dist_file>.journal` (mode 0600): what a restarted
// coordinator (ddp-coordinator --resume-from-journal) needs to take over the job so that its
// clients keep working. One record per state change that matters:
//   header       job id, Slurm generation, nonce, the three tokens, world size (first record)
//   incarnation  a coordinator (re)started on this journal: its incarnation number
//   registered   a worker took a slot before the first rank table
//   generation   a membership generation is complete: the rank table, restarts used
//   checkpoint   a committed checkpoint (the checkpoint ledger)
//   epoch        the agreed parameters of an epoch (the shard ledger; reset by a new generation)
//   stop         a graceful stop was asked for
//   done         a rank reported its end (finished, or checkpointed and stopped)
//   failed       the job failed: the cause (again when a later report revises it)
// What it does not hold starts empty after a restart: progress, phases and liveness (the next
// heartbeats fill them), the event list, metrics history and the c10d key-value store (each
// process group rendezvouses under its generation's prefix, and the next one starts afresh).
//
// The record format (framing, encoding, parsing) is journal_record.h.
//
// Durability: the job calls the sink under its own lock, so appending never touches the file:
// it queues the framed record and returns. A writer thread writes what is queued to the file at
// once (one write per batch; the page cache survives the coordinator's own death, SIGKILL
// included), and a syncer thread fdatasyncs in the background, batching every record written
// while an fsync is in flight (group commit): registering thousands of ranks costs a handful of
// fsyncs, no reply waits for one, and a stuck file system stops neither the job's ticks nor its
// replies. A crash of the whole node may lose the last few milliseconds of records; the node's
// task 0 (which restarts the coordinator) is gone with it then anyway.
//
// Failing loudly: a write or an fdatasync that fails fails the journal for good (records after
// it are counted as dropped, never written after a hole), removes the file so that a restart is
// refused rather than restoring an old state, logs a line and shows in Health() (the job turns
// it into an event and the status's `journal` field). A write or fdatasync that has not returned
// for kStuckAfter shows as stuck.
//
// Thread safety: every method is thread-safe. Appends and Health() never wait for I/O.
#ifndef SLURM_DDP_COORDINATOR_JOB_JOURNAL_H_
#define SLURM_DDP_COORDINATOR_JOB_JOURNAL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/coordinator_api.h"
#include "common/job_status.h"
#include "coordinator/job/journal_record.h"
#include "coordinator/job/journal_sink.h"
#include "coordinator/job/membership.h"

namespace ddp {

// "<dist_file>.journal"
std::string JournalPath(const std::string& dist_file);

class Journal : public JournalSink {
 public:
  using Log = std::function<void(const std::string&)>;
  // A write or fdatasync in flight this long shows as stuck (Health()).
  static constexpr absl::Duration kStuckAfter = absl::Seconds(10);
  // The destructor waits this long for queued records to be written and synced; a file system
  // stuck longer is left to the threads, which end on their own if it ever answers.
  static constexpr absl::Duration kCloseTimeout = absl::Seconds(5);

  // A fresh journal at `path` starting with `header` and incarnation 0. A file already there is
  // a dead job's leftover (the caller holds the dist_file's lock, common/dist_file_lock.h) and is
  // replaced. `log` gets a line if the journal fails later (may be empty).
  static absl::StatusOr<std::unique_ptr<Journal>> Create(const std::string& path,
                                                         const JournalHeader& header, Log log);
  // Reads the journal at `path` for a restart: refuses (FAILED_PRECONDITION) one whose header
  // is not `expected`'s job (job id, generation, nonce, the three tokens, and the world size
  // when `expected.world_size` > 0), DATA_LOSS for a corrupt one (journal_record.h), and in both
  // cases leaves the file untouched. Only then cuts off a torn tail, appends the incarnation
  // record `state->incarnation` + 1 and opens for appending. The state read comes back in
  // `state` (its incarnation is the new one).
  static absl::StatusOr<std::unique_ptr<Journal>> Resume(const std::string& path,
                                                         const JournalHeader& expected, Log log,
                                                         JournalState* state);
  ~Journal() override;
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // JournalSink
  void Registered(const WorkerIdentity& who) override;
  void GenerationFormed(const RankTable& table, int restarts) override;
  void CheckpointCommitted(const CommittedCheckpoint& checkpoint) override;
  void EpochAgreed(int64_t epoch, const ShardRequest& request) override;
  void StopRequested(const std::string& reason) override;
  void RankFinished(int rank, int pid, bool stopped) override;
  void JobFailed(const FailureCause& cause) override;
  JournalHealth Health() const override;
  void AwaitWritten(absl::Duration max) override;

  // Blocks until everything appended so far is written and fsynced, the journal failed, or
  // `timeout` passed (DEADLINE_EXCEEDED).
  absl::Status Sync(absl::Duration timeout = absl::InfiniteDuration());
  int64_t appended() const;
  int64_t fsyncs() const;
  const std::string& path() const;
  // kStuckAfter unless set (tests).
  void set_stuck_after(absl::Duration d);

 private:
  struct Shared;  // what the writer and syncer threads use; they may outlive this object
  explicit Journal(std::shared_ptr<Shared> shared);
  void Append(const std::string& payload);

  std::shared_ptr<Shared> shared_;
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_JOURNAL_H_
