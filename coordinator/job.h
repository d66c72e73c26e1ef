// The job as the coordinator sees it: registration (deterministic ranks), liveness (heartbeats
// against the coordinator's monotonic clock), progress, operator commands, shard parameters and
// the state machine REGISTERING -> RUNNING -> (STOPPING) -> SUCCEEDED | FAILED, with a bounded
// history of events. Pure domain logic: no gRPC, no threads of its own. Time comes from the
// injected Clock; the server calls Tick() periodically to detect lost ranks and the registration
// deadline. (Named Job because common/job_status.h already calls the state enum JobState.)
//
// Registration waits without a thread: Register takes a callback that runs once the world is
// complete (or the job fails). Callbacks and the log sink run without the lock held.
//
// Thread safety: every public method is thread-safe.
#ifndef SLURM_DDP_COORDINATOR_JOB_H_
#define SLURM_DDP_COORDINATOR_JOB_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
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
  absl::Status ReportDone(int rank, int pid, const absl::Status& outcome);
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
  // Bumped by every change (watchers poll it).
  uint64_t version() const;
  const JobConfig& config() const { return config_; }

 private:
  struct Slot {
    WorkerIdentity who;
    std::vector<RegisterCallback> waiting;
  };
  struct RankInfo {
    WorkerIdentity who;
    absl::Time last_seen;
    ProgressReport progress;
    std::string state = "starting";
    bool done = false;
    int64_t last_epoch = -1;
  };
  using Completion = std::function<void()>;

  absl::Status CheckWorkerLocked(int rank, int pid) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void CompleteRegistrationLocked(std::vector<Completion>* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailLocked(int rank, const std::string& reason, absl::StatusCode code,
                  std::vector<Completion>* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetStateLocked(JobState state, const std::string& why, std::vector<Completion>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EventLocked(const std::string& line, std::vector<Completion>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string MissingWorkersLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  std::string DescribeRankLocked(int rank) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  bool FinishedLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  static void Run(std::vector<Completion>& completions);

  const JobConfig config_;
  const Clock* const clock_;
  const absl::Time start_;

  mutable absl::Mutex mu_;
  JobState state_ ABSL_GUARDED_BY(mu_) = JobState::kRegistering;
  bool stop_graceful_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;  // every rank stopped after a graceful stop
  int failed_rank_ ABSL_GUARDED_BY(mu_) = -1;
  std::string failure_reason_ ABSL_GUARDED_BY(mu_);
  // Registration: (node_rank, local_rank) -> slot. Ordered, so ranks follow map order.
  std::map<std::pair<int, int>, Slot> slots_ ABSL_GUARDED_BY(mu_);
  std::vector<RankInfo> ranks_ ABSL_GUARDED_BY(mu_);  // filled once the world is complete
  int num_nodes_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int64_t, ShardRequest> epoch_params_ ABSL_GUARDED_BY(mu_);
  bool has_checkpoint_ ABSL_GUARDED_BY(mu_) = false;
  CommittedCheckpoint checkpoint_ ABSL_GUARDED_BY(mu_);
  absl::Time running_since_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> events_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_H_
