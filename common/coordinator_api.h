// The plain C++ interface through which the data plane (trainer/, LibTorch) talks to the
// coordinator. The control plane implements it over gRPC (client/coordinator_client.h); the data
// plane never sees a protobuf or gRPC header (docs/architecture.md, "Layers"). Tests implement it
// in memory.
//
// Thread safety: implementations must be safe to call from several threads at once (the c10d
// store is used by NCCL's watchdog thread while the training thread heartbeats).
#ifndef SLURM_DDP_COMMON_COORDINATOR_API_H_
#define SLURM_DDP_COMMON_COORDINATOR_API_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/failure_cause.h"
#include "common/job_status.h"

namespace ddp {

// What a worker asks for at the start of each epoch. Every rank must send the same dataset_size,
// seed, shuffle and drop_last; the coordinator refuses a rank that disagrees.
struct ShardRequest {
  int64_t epoch = 0;
  int64_t dataset_size = 0;
  int64_t seed = 0;
  bool shuffle = true;
  bool drop_last = false;
  // Resuming from a checkpoint of an earlier generation: the sampler position it recorded
  // (CommittedCheckpoint::consumed) and the world size that consumed it. 0 = fresh epoch.
  // Ignored when this generation already committed a checkpoint for `epoch`.
  int64_t resume_consumed = 0;
  int resume_world_size = 0;
};
inline bool operator==(const ShardRequest& a, const ShardRequest& b) {
  return a.epoch == b.epoch && a.dataset_size == b.dataset_size && a.seed == b.seed &&
         a.shuffle == b.shuffle && a.drop_last == b.drop_last &&
         a.resume_consumed == b.resume_consumed && a.resume_world_size == b.resume_world_size;
}
inline bool operator!=(const ShardRequest& a, const ShardRequest& b) { return !(a == b); }

// The parameters from which a worker computes its sample order for one epoch (common/
// sampler_plan.h). Identical to PyTorch's DistributedSampler(shuffle, seed, drop_last) when
// consumed == 0 and the world size did not change.
struct ShardAssignment {
  int64_t epoch = 0;
  int64_t dataset_size = 0;
  int64_t seed = 0;
  bool shuffle = true;
  bool drop_last = false;
  int world_size = 1;
  int rank = 0;
  // Global positions of the epoch's padded permutation already consumed at the last committed
  // checkpoint (0 for a fresh epoch). See sampler_plan.h for the resume/re-split rule.
  int64_t consumed = 0;
  // World size of the generation that consumed `consumed` positions (== world_size if unchanged).
  int consumed_world_size = 1;
};

// Who a worker is before it has a rank: its place in the launch layout.
struct WorkerIdentity {
  std::string host;          // hostname, for status views and error messages
  int node_rank = 0;         // index of this worker's node in the job (SLURM_NODEID or 0)
  int local_rank = 0;        // index of this worker on its node (GPU index)
  int local_world_size = 1;  // workers on this node
  int pid = 0;
  std::string nonce;      // generation nonce read from the dist_file (verified by the server)
  std::string node_name;  // SLURMD_NODENAME (empty outside Slurm): what an exclude list names
  // The GetShard this worker will make first, when it knows it before it has a rank (a run that
  // starts fresh): answered with the registration (RankAssignment::first_shard).
  std::optional<ShardRequest> first_shard;
};

// What registration returns once the whole world has joined.
struct RankAssignment {
  int rank = 0;  // global rank: ordered by node, then local rank
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  int num_nodes = 1;
  int64_t generation = 0;  // Slurm restart count of this job
  // In-job recovery (proto/coordinator.proto, RECOVERY): the coordinator's membership
  // generation (0 for the first rank table), where its process group rendezvouses in the store,
  // and whether some member kept its training state (then the state is synced from the most
  // advanced member and no checkpoint is read).
  int64_t membership_generation = 0;
  std::string store_prefix;
  bool state_from_peers = false;
  int restarts = 0;             // job-wide restarts used so far
  FailureCause recovery_cause;  // why this generation was formed (empty for the first)
  double recovery_seconds = 0;  // from the loss to this generation's completion
  // How often this worker heartbeats (sized by the world; Job::HeartbeatInterval).
  absl::Duration heartbeat_interval = absl::Seconds(1);
  // Registration only, when WorkerIdentity::first_shard was sent: its answer, or the error its
  // own GetShard would have got.
  std::optional<absl::StatusOr<ShardAssignment>> first_shard;
};

// A survivor asking to join the next membership generation (CoordinatorApi::Rejoin).
struct RejoinRequest {
  int64_t membership_generation = 0;  // the generation it leaves
  int64_t committed_step = 0;         // the last optimizer step it applied
  std::string reason;                 // what it saw (a failed collective, a newer generation)
};

// What a worker is doing overall (its rank's state in status follows it).
enum class WorkerPhase { kStarting, kTraining, kEvaluating, kCheckpointing, kFinished };

// A worker's time in each section of its steps since it started, and the steps counted
// (ProgressReporter, from the phase marks; coordinator/job/straggler_watch.h scores the ranks on
// the differences over a recent window).
struct SectionTotals {
  int64_t steps = 0;
  double seconds[kNumStepSections] = {0, 0, 0, 0};  // by StepSection
};

// Progress a worker reports with each heartbeat (about once a second).
struct ProgressReport {
  WorkerPhase phase = WorkerPhase::kStarting;
  // Where inside the step the training thread is, and for how long (kNone: not reported).
  StepPhase step_phase = StepPhase::kNone;
  double phase_seconds = 0.0;
  int64_t epoch = 0;
  int64_t epochs = 0;
  int64_t step = 0;  // global step count since the start of training
  int64_t steps_per_epoch = 0;
  double loss = 0.0;                // recent training loss (rank-local)
  double samples_per_second = 0.0;  // rank-local throughput
  double data_wait_share = 0.0;     // fraction of step time spent waiting for data
  double forward_ms = 0.0;
  double backward_ms = 0.0;
  double comm_wait_ms = 0.0;
  double optimizer_ms = 0.0;
  double overlap_share = 0.0;  // fraction of allreduce time hidden behind backward
  bool stop_signaled = false;  // the worker received SIGTERM, SIGUSR1 or SIGINT
  SectionTotals sections;      // filled by ProgressReporter from its phase marks
};

// What the coordinator tells a worker in a heartbeat reply. kExit: end the process now with
// HeartbeatReply::exit_code, from the heartbeat thread (the training thread may be stuck).
enum class Command { kContinue, kCheckpointAndStop, kAbort, kExit };

struct HeartbeatReply {
  Command command = Command::kContinue;
  // Why, for people: the failure's text (kAbort) or the stop request (kCheckpointAndStop).
  std::string reason;
  // With kAbort: the job's failure as the coordinator decided it. A worker acts on cause.rank
  // and cause.kind (e.g. "was I the failed rank?"), never on the text.
  FailureCause cause;
  // The newest membership generation (the one being formed while the job recovers). A worker
  // whose generation is older leaves its process group and rejoins.
  int64_t membership_generation = 0;
  // With kExit: the code to exit with (common/exit_codes.h).
  int exit_code = 0;
};

// A checkpoint that rank 0 has durably written.
struct CommittedCheckpoint {
  int64_t epoch = 0;
  int64_t step = 0;
  int64_t consumed = 0;  // global positions of `epoch` consumed (sampler_plan.h)
  std::string path;
};

// A worker that died without reporting, as its launcher saw it (from waitpid).
struct LostWorker {
  int node_rank = 0;
  int local_rank = 0;
  int pid = 0;
  std::string what;   // for people: "killed by signal 9"
  int signal = 0;     // > 0: killed by this signal (the failure's kind is kSignal)
  int exit_code = 0;  // with signal == 0: the exit status (kind kExitCode)
};

// What a launcher does after reporting a lost worker.
enum class LostAction {
  kStop,     // the job failed or cannot recover: stop this node's other workers
  kRespawn,  // start the worker again: same node, local rank and GPU
  kWait,     // nothing now (a replacement that died before registering; the job's deadline
             // decides)
  kLeave,    // the node's ranks were handed to a spare (--straggler-action replace): stop the
             // node's other workers and leave, exit 0
};

struct LostDecision {
  std::string description;  // "rank 3 (host h, node 1, local rank 1, pid 123)", for the log
  LostAction action = LostAction::kStop;
  // No answer came (the coordinator is restarting or being taken over): `action` is a default.
  bool unanswered = false;
  // With kLeave: why the node was retired ("its node was handed to a spare (--straggler-action
  // replace)"); empty from a coordinator that does not say.
  std::string retired = {};
};

// A spare node's launcher standing by (--spare-nodes; Job::StandBy).
struct SpareReport {
  int node_rank = 0;  // its own node id, outside the job's nodes
  int local_world_size = 1;
  std::string host;
  int pid = 0;
  std::string nonce;  // filled by the client from the dist_file when empty
};

enum class SpareAction {
  kWait,      // keep standing by
  kTakeOver,  // start workers as node `node_rank`
  kLeave,     // the job is finished
};

struct SpareDecision {
  SpareAction action = SpareAction::kWait;
  int node_rank = -1;       // kTakeOver: the lost node
  std::string description;  // for the log
};

// Fencing (Job::Fences): a node's task names its running workers; the coordinator answers with
// those it has declared lost (silent past the heartbeat timeout) whose process still runs, so
// that the task kills them before their slot is filled again.
struct LiveWorker {
  int local_rank = 0;
  int pid = 0;
};

struct FenceOrder {
  int local_rank = 0;
  int pid = 0;
  std::string reason;  // the loss, for the task's log: "rank 1 (...) lost: no heartbeat for 10s"
};

class CoordinatorApi {
 public:
  virtual ~CoordinatorApi() = default;

  // Blocks until every worker of the job has registered (or `timeout`), then returns this
  // worker's rank. Calling again after a lost reply returns the same assignment.
  virtual absl::StatusOr<RankAssignment> Register(const WorkerIdentity& who,
                                                  absl::Duration timeout) = 0;

  // --- c10d key-value store (semantics of c10d::Store) --------------------------------------
  virtual absl::Status StoreSet(const std::string& key, const std::vector<uint8_t>& value) = 0;
  // Blocks until `key` exists; DEADLINE_EXCEEDED after `timeout`.
  virtual absl::StatusOr<std::vector<uint8_t>> StoreGet(const std::string& key,
                                                        absl::Duration timeout) = 0;
  // Atomically adds `delta` to the integer stored at `key` (created as 0) and returns the sum.
  virtual absl::StatusOr<int64_t> StoreAdd(const std::string& key, int64_t delta) = 0;
  // Sets `key` to `desired` if its value is `expected` (or if absent and `expected` is empty);
  // returns the value now stored.
  virtual absl::StatusOr<std::vector<uint8_t>> StoreCompareSet(
      const std::string& key, const std::vector<uint8_t>& expected,
      const std::vector<uint8_t>& desired) = 0;
  virtual absl::StatusOr<bool> StoreDelete(const std::string& key) = 0;
  virtual absl::StatusOr<bool> StoreCheck(const std::vector<std::string>& keys) = 0;
  virtual absl::StatusOr<int64_t> StoreNumKeys() = 0;
  // Blocks until all `keys` exist; DEADLINE_EXCEEDED after `timeout`.
  virtual absl::Status StoreWait(const std::vector<std::string>& keys, absl::Duration timeout) = 0;

  // --- training -------------------------------------------------------------------------------
  virtual absl::StatusOr<ShardAssignment> GetShard(const ShardRequest& request) = 0;
  virtual absl::StatusOr<HeartbeatReply> Heartbeat(const ProgressReport& progress) = 0;
  // A heartbeat the caller waits on (a worker that has just rejoined, before its next step): a
  // node's relay sends it at once instead of batching it with the other workers' beats.
  virtual absl::StatusOr<HeartbeatReply> HeartbeatNow(const ProgressReport& progress) {
    return Heartbeat(progress);
  }
  virtual absl::Status CommitCheckpoint(const CommittedCheckpoint& checkpoint) = 0;
  // The worker's outcome: OK when it finished training; CANCELLED when it checkpointed and
  // stopped; else why it failed. The status code is the typed channel the coordinator decides
  // the failure's kind from: UNAVAILABLE or DEADLINE_EXCEEDED mean a collective (or a peer) failed
  // (kCollectiveError); any other code is the worker's own error (kWorkerError).
  virtual absl::Status ReportDone(const absl::Status& outcome) = 0;
  // This worker's process group failed (or a heartbeat named a newer membership generation):
  // blocks until the next generation is complete (or `timeout`) and returns this worker's place
  // in it; the client names itself by the new rank from then on. ABORTED with the job's failure
  // when the job cannot recover.
  virtual absl::StatusOr<RankAssignment> Rejoin(const RejoinRequest& request,
                                                absl::Duration timeout) = 0;
  // --- launcher -------------------------------------------------------------------------------
  // One of this node's workers died without reporting (see Job::ReportLost): the job recovers
  // (kRespawn) or fails naming its rank (kStop).
  virtual absl::StatusOr<LostDecision> ReportLost(const LostWorker& lost) = 0;
  // A spare node's launcher stands by (see Job::StandBy). Fakes that have no spares need not
  // implement it.
  virtual absl::StatusOr<SpareDecision> StandBy(const SpareReport& /*spare*/) {
    return absl::UnimplementedError("StandBy");
  }
  // A cheap call that proves the coordinator answers (a standby's probe,
  // trainer/launcher/standby.h). Fakes that have no standby need not implement it.
  virtual absl::Status Ping() { return absl::UnimplementedError("Ping"); }
  // A node's task asks which of its running workers to kill (see Job::Fences); about once a
  // second while it supervises workers. Fakes that fence nothing need not implement it.
  virtual absl::StatusOr<std::vector<FenceOrder>> Fences(int /*node_rank*/,
                                                         const std::vector<LiveWorker>& /*live*/) {
    return absl::UnimplementedError("Fences");
  }
};

}  // namespace ddp

#endif  // SLURM_DDP_COMMON_COORDINATOR_API_H_
