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
// What it does not hold starts empty after a restart: progress, phases and liveness (the next
// heartbeats fill them), the event list, metrics history and the c10d key-value store (each
// process group rendezvouses under its generation's prefix, and the next one starts afresh).
//
// The record format (framing, encoding, parsing) is journal_record.h.
//
// Durability: Append writes the record to the file at once (under the job's lock; a write to the
// page cache, which survives the coordinator's own death, SIGKILL included) and the syncer thread
// fdatasyncs in the background, batching every record appended while an fsync is in flight
// (group commit): registering thousands of ranks costs a handful of fsyncs, and no reply waits
// for one. A crash of the whole node may lose the last few milliseconds of records; the node's
// task 0 (which restarts the coordinator) is gone with it then anyway.
//
// Thread safety: every method is thread-safe.
#ifndef SLURM_DDP_COORDINATOR_JOB_JOURNAL_H_
#define SLURM_DDP_COORDINATOR_JOB_JOURNAL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/coordinator_api.h"
#include "coordinator/job/journal_record.h"
#include "coordinator/job/journal_sink.h"
#include "coordinator/job/membership.h"

namespace ddp {

// "<dist_file>.journal"
std::string JournalPath(const std::string& dist_file);

class Journal : public JournalSink {
 public:
  using Log = std::function<void(const std::string&)>;

  // A fresh journal at `path` (an old one there is replaced) starting with `header` and
  // incarnation 0. `log` gets a line if the journal fails later (may be empty).
  static absl::StatusOr<std::unique_ptr<Journal>> Create(const std::string& path,
                                                         const JournalHeader& header, Log log);
  // Reads the journal at `path` for a restart: refuses (FAILED_PRECONDITION) one whose header
  // is not `expected`'s job (job id, generation, nonce), DATA_LOSS for a corrupt one; cuts off a
  // torn tail, appends the incarnation record `state->incarnation` + 1 and opens for appending.
  // The state read comes back in `state` (its incarnation is the new one).
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

  // Blocks until everything appended so far is fsynced (or the journal failed).
  absl::Status Sync();
  int64_t appended() const;
  int64_t fsyncs() const;
  const std::string& path() const { return path_; }

 private:
  Journal(std::string path, int fd, Log log);
  void Append(const std::string& payload);
  void SyncLoop();

  const std::string path_;
  const int fd_;
  const Log log_;
  mutable absl::Mutex mu_;
  int64_t appended_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t synced_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t fsyncs_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  absl::CondVar work_;       // something to sync, or stopping
  absl::CondVar synced_cv_;  // synced_ moved
  std::thread syncer_;
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_JOURNAL_H_
