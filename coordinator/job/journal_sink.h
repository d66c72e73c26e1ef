// Where the job reports the state changes a restarted coordinator needs (coordinator/job/
// journal.h writes them to the append-only journal beside the dist_file). A narrow interface so
// that the job stays testable without files: tests pass a recorder, or nothing.
//
// Thread safety: the job calls every method under its own lock, so implementations must not
// block (the journal queues records for its own writer and syncer threads) and must not call
// back into the job.
#ifndef SLURM_DDP_COORDINATOR_JOB_JOURNAL_SINK_H_
#define SLURM_DDP_COORDINATOR_JOB_JOURNAL_SINK_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "common/coordinator_api.h"
#include "common/job_status.h"
#include "coordinator/job/membership.h"

namespace ddp {

class JournalSink {
 public:
  virtual ~JournalSink() = default;
  // A worker took a new slot before the first rank table (registration).
  virtual void Registered(const WorkerIdentity& who) = 0;
  // A membership generation is complete: its rank table, with the restarts used so far.
  virtual void GenerationFormed(const RankTable& table, int restarts) = 0;
  virtual void CheckpointCommitted(const CommittedCheckpoint& checkpoint) = 0;
  // The first request of `epoch` in this membership generation fixed its parameters.
  virtual void EpochAgreed(int64_t epoch, const ShardRequest& request) = 0;
  // A graceful stop was asked for (operator, signal, a worker's stop signal or a stopped rank).
  virtual void StopRequested(const std::string& reason) = 0;
  // `rank` (worker `pid`) reported its end: finished, or checkpointed and stopped.
  virtual void RankFinished(int rank, int pid, bool stopped) = 0;
  // The job failed (or its failure's cause was revised): a coordinator restarted during the
  // linger that follows restores the failure, tells the workers still running, and writes the
  // result, instead of finding nothing to resume.
  virtual void JobFailed(const FailureCause& cause) = 0;
  // Whether records still reach the disk (common/job_status.h); a recorder answers kNone.
  virtual JournalHealth Health() const { return {}; }
  // Waits (never under the job's lock) until every record appended so far is in the file, at
  // most `max`, and not at all while a write has been in flight longer than `max` (a stuck file
  // system). The RPC layer calls it before each reply, so that what a reply tells a client
  // survives the coordinator's SIGKILL right after it.
  virtual void AwaitWritten(absl::Duration max) { (void)max; }
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_JOURNAL_SINK_H_
