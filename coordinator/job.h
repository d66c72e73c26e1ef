// The job as the coordinator sees it: registration (deterministic ranks), liveness (heartbeats
// against the coordinator's monotonic clock), progress, operator commands, shard parameters and
// the state machine REGISTERING -> RUNNING -> (STOPPING) -> SUCCEEDED | FAILED, with a bounded
// history of events. Pure domain logic: no gRPC, no threads of its own. Time comes from the
// injected Clock; the server calls Tick() periodically to detect lost ranks and the registration
// deadline. (Named Job because common/job_status.h already calls the state enum JobState.)
// Registration is implemented in job_registration.cc, everything else in job.cc.
//
// Registration waits without a thread: Register takes a callback that runs once the world is
// complete (or the job fails). Callbacks and the log sink run without the lock held.
//
// Thread safety: every public method is thread-safe. Locking is split so that thousands of
// heartbeats per second do not queue behind status readers: job-wide state sits under `mu_`;
// each rank's progress and liveness sit in its own RankSlot under the slot's mutex. The slot
// array is built once (under `mu_`) when the world completes and published through the atomic
// `world_complete_`; after that Heartbeat takes only its slot's lock and reads the current
// command from an atomic. Lock order: `mu_` before any slot lock; never two slot locks at once.
#ifndef SLURM_DDP_COORDINATOR_JOB_H_
#define SLURM_DDP_COORDINATOR_JOB_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/coordinator_api.h"
#include "common/job_status.h"
#include "coordinator/clock.h"

namespace ddp {

inline constexpr int kMaxWorldSize = 65536;
inline constexpr int kExitStopped = 3;  // "stopped for requeue"

struct JobConfig {
  std::string job_id;
  int64_t generation = 0;
  std::string nonce;  // empty: registration does not check the nonce
  int world_size = 1;
  absl::Duration registration_timeout = absl::Seconds(300);
  absl::Duration heartbeat_timeout = absl::Seconds(10);
  // When Tick() finds more than this since the previous Tick(), the coordinator itself was not
  // running: its process was stopped (Slurm's `scontrol suspend` stops every process of a job,
  // the workers too) or frozen, or the host paused. That time is not counted as silence
  // against any rank, nor against the registration deadline. Infinite: every gap counts (the
  // caller does not tick regularly). ddp-coordinator ticks every 50 ms and uses 2 s.
  absl::Duration stall_threshold = absl::InfiniteDuration();
  size_t max_events = 200;
  // Receives one line per registration and state change (may be empty).
  std::function<void(const std::string&)> log;
};

class Job {
 public:
  using RegisterCallback = std::function<void(absl::StatusOr<RankAssignment>)>;

  // `clock` must outlive this object. config.world_size must be in [1, kMaxWorldSize].
  Job(JobConfig config, const Clock* clock);
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Joins the world; `done` runs once every worker has joined (maybe before Register returns),
  // or with the error that ends the wait. A repeat from the same (host, pid) joins the same slot.
  void Register(const WorkerIdentity& who, RegisterCallback done);

  absl::StatusOr<ShardAssignment> GetShard(int rank, int pid, const ShardRequest& request);
  absl::StatusOr<HeartbeatReply> Heartbeat(int rank, int pid, const ProgressReport& progress);
  absl::Status CommitCheckpoint(int rank, int pid, const CommittedCheckpoint& checkpoint);
  // `outcome` OK: the rank finished. CANCELLED: the rank checkpointed and stopped (after a
  // graceful stop; one arriving while RUNNING starts a graceful stop of the whole job, as when
  // Slurm signals a node before preemption). Any other error fails the job naming the rank.
  absl::Status ReportDone(int rank, int pid, const absl::Status& outcome);
  // A launcher reports that its worker (node_rank, local_rank, pid) died without reporting, e.g.
  // killed by a signal; `what` says how ("killed by signal 9"). Fails the job naming that rank.
  // When the job already failed in the last kRootCauseWindow because another rank reported a
  // (communication) error, the death is the root cause: the job's failure is re-attributed to
  // the dead rank. Returns the rank's description ("rank 3 (host h, node 1, ...)").
  absl::StatusOr<std::string> ReportLost(int node_rank, int local_rank, int pid,
                                         const std::string& what);
  static constexpr absl::Duration kRootCauseWindow = absl::Seconds(5);
  // graceful: ask every rank to checkpoint and stop; otherwise abort the job now.
  absl::Status Stop(bool graceful, const std::string& reason);

  // Detects lost ranks and the registration deadline. Call periodically.
  void Tick();

  JobStatus Status() const;
  bool Finished() const;
  // Blocks until the job is terminal or `timeout` passes; returns Finished().
  bool WaitFinished(absl::Duration timeout) const;
  // Process exit code for the final state: 0 SUCCEEDED, kExitStopped after a graceful stop,
  // 1 otherwise.
  int ExitCode() const;
  // Bumped by every change, heartbeats included.
  uint64_t version() const { return version_.load(std::memory_order_acquire); }
  // Bumped only by structural changes (registrations, state changes, events, checkpoints,
  // ranks done): what a status reader must never miss. Heartbeats leave it alone.
  uint64_t major_version() const { return major_version_.load(std::memory_order_acquire); }
  const JobConfig& config() const { return config_; }

 private:
  // A registration slot, keyed by (node_rank, local_rank), before ranks exist.
  struct Slot {
    WorkerIdentity who;
    std::vector<RegisterCallback> waiting;
  };
  // One rank after the world is complete. `who` is immutable once published.
  struct RankSlot {
    WorkerIdentity who;
    mutable absl::Mutex mu;
    absl::Time last_seen ABSL_GUARDED_BY(mu);
    ProgressReport progress ABSL_GUARDED_BY(mu);
    const char* state ABSL_GUARDED_BY(mu) = "starting";  // a string literal
    bool sticky ABSL_GUARDED_BY(mu) = false;  // done / stopped / failed / lost: state is final
    bool done ABSL_GUARDED_BY(mu) = false;    // ReportDone received
    int64_t last_epoch ABSL_GUARDED_BY(mu) = -1;
  };
  using Completion = std::function<void()>;

  // Lock-free: the world is complete, `rank` is in range and registered to `pid`.
  absl::StatusOr<RankSlot*> CheckWorker(int rank, int pid) const;
  void CompleteRegistrationLocked(std::vector<Completion>* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailLocked(int rank, const std::string& reason, absl::StatusCode code,
                  std::vector<Completion>* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetStateLocked(JobState state, const std::string& why, std::vector<Completion>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EventLocked(const std::string& line, std::vector<Completion>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RankFinishedLocked(std::vector<Completion>* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForgiveStallLocked(absl::Duration gap, absl::Time now, std::vector<Completion>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string MissingWorkersLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  std::string DescribeRank(int rank) const;
  bool FinishedLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  static void Run(std::vector<Completion>& completions);
  static std::string SecondsText(absl::Duration d);  // "1.5s"

  const JobConfig config_;
  const Clock* const clock_;
  const absl::Time start_;
  absl::Time last_tick_ ABSL_GUARDED_BY(mu_);
  // Time the coordinator was stalled while registering (discounted from the deadline).
  absl::Duration registration_stalled_ ABSL_GUARDED_BY(mu_);

  mutable absl::Mutex mu_;
  JobState state_ ABSL_GUARDED_BY(mu_) = JobState::kRegistering;
  bool stop_graceful_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;  // every rank stopped after a graceful stop
  int failed_rank_ ABSL_GUARDED_BY(mu_) = -1;
  std::string failure_reason_ ABSL_GUARDED_BY(mu_);
  // Until when a failure reported by a rank itself may be re-attributed by ReportLost.
  absl::Time failure_revisable_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // Registration: (node_rank, local_rank) -> slot. Ordered, so ranks follow map order.
  std::map<std::pair<int, int>, Slot> slots_ ABSL_GUARDED_BY(mu_);
  int num_nodes_ ABSL_GUARDED_BY(mu_) = 0;
  int ranks_done_ ABSL_GUARDED_BY(mu_) = 0;  // ranks with ReportDone
  std::map<int64_t, ShardRequest> epoch_params_ ABSL_GUARDED_BY(mu_);
  bool has_checkpoint_ ABSL_GUARDED_BY(mu_) = false;
  CommittedCheckpoint checkpoint_ ABSL_GUARDED_BY(mu_);
  absl::Time running_since_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> events_ ABSL_GUARDED_BY(mu_);

  // Written once under mu_ (CompleteRegistrationLocked) before world_complete_ is set with
  // release order; read-only (the array; slots have their own locks) afterwards.
  std::unique_ptr<RankSlot[]> ranks_;
  int num_ranks_ = 0;
  std::atomic<bool> world_complete_{false};
  // The command every heartbeat reply carries (mirrors state_; written under mu_).
  std::atomic<Command> command_{Command::kContinue};
  std::atomic<uint64_t> version_{0};
  std::atomic<uint64_t> major_version_{0};
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_H_
