// A worker's session with its job's coordinator: found through the dist_file, registered for a
// global rank, heartbeating progress in the background (ProgressReporter, which also carries the
// coordinator's stop and abort commands and its newest membership generation back), the c10d
// store that process groups rendezvous through, rejoining the next membership generation after
// a failure (in-job recovery), and the worker's outcome reported at the end. It outlives every
// process group built on its store.
//
// Thread safety: the training thread owns it; api() is safe from any thread (CoordinatorApi's
// contract), and so is reporter().
#ifndef SLURM_DDP_TRAINER_WORKER_COORDINATOR_SESSION_H_
#define SLURM_DDP_TRAINER_WORKER_COORDINATOR_SESSION_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/coordinator_api.h"
#include "trainer/ddp/grpc_store.h"
#include "trainer/launcher/launch_plan.h"
#include "trainer/worker/progress_reporter.h"

namespace ddp {

class CoordinatorSession {
 public:
  // What a session is opened with (the flags of the same names).
  struct Options {
    absl::Duration registration_timeout = absl::Seconds(120);  // --registration-timeout
    absl::Duration rpc_timeout = absl::Seconds(10);        // each call's deadline, retries included
    absl::Duration coordinator_grace = absl::Seconds(60);  // --coordinator-grace
    absl::Duration stop_timeout = absl::Seconds(60);       // --stop-timeout
    // The GetShard this worker will make first, when it knows it before it has a rank: sent
    // with the registration, whose reply answers it (TakeFirstShard).
    std::optional<ShardRequest> first_shard;
  };

  // Connects through placement.dist_file and registers (both within
  // options.registration_timeout). Errors say which step failed.
  static absl::StatusOr<std::unique_ptr<CoordinatorSession>> Open(const Options& options,
                                                                  const WorkerPlacement& placement);
  // A session over an already registered client; `reporter` configures its heartbeats (the
  // log prefix is the session's); `first_shard`: what the registration asked (Options).
  CoordinatorSession(std::unique_ptr<CoordinatorApi> api, RankAssignment rank,
                     ProgressReporterOptions reporter,
                     std::optional<ShardRequest> first_shard = std::nullopt);
  CoordinatorSession(const CoordinatorSession&) = delete;
  CoordinatorSession& operator=(const CoordinatorSession&) = delete;

  CoordinatorApi& api() { return *api_; }
  // This worker's place in its current membership generation (changes with Rejoin).
  const RankAssignment& rank() const { return rank_; }
  ProgressReporter& reporter() { return reporter_; }
  // The shard the registration answered, if it answered `request` (Options::first_shard, the
  // same fields) with an assignment and this worker has not rejoined since; once.
  std::optional<ShardAssignment> TakeFirstShard(const ShardRequest& request);
  const std::string& log_prefix() const { return log_prefix_; }  // "[rank 3] "

  // The coordinator's c10d store (CoordinatorStore), blocking calls bounded by `timeout`;
  // `after_set` as CoordinatorStore's (tests).
  c10::intrusive_ptr<c10d::Store> Store(std::chrono::milliseconds timeout,
                                        CoordinatorStore::SetHook after_set = nullptr);

  // Leaves the current membership generation and joins the next (blocking, bounded by
  // `timeout`): the new place becomes rank(). ABORTED with the coordinator's reason when the job
  // cannot recover.
  absl::StatusOr<RankAssignment> Rejoin(int64_t committed_step, const std::string& reason,
                                        absl::Duration timeout);

  // Tells the coordinator how this worker ended; a failure to tell it is a warning (rank 0), and
  // so is a coordinator that has stopped answering heartbeats (nothing is sent then).
  void ReportOutcome(const absl::Status& outcome);

 private:
  std::unique_ptr<CoordinatorApi> api_;
  RankAssignment rank_;
  std::optional<ShardRequest> first_shard_request_;  // what the registration asked, if anything
  std::string log_prefix_;
  ProgressReporter reporter_;  // last: stops before the client goes
};

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_WORKER_COORDINATOR_SESSION_H_
