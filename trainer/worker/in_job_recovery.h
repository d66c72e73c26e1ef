// In-job recovery, the worker's side (proto/coordinator.proto, RECOVERY): when a collective or
// store call fails because a peer is gone, or the coordinator announces a newer membership
// generation, the worker aborts its process group, keeps its model, optimizer and position,
// rejoins the next generation at the coordinator, builds the new group under that generation's
// store prefix and takes the state of the most advanced rank (CommunicationStage::Connect, the
// same path as the start). No checkpoint file is read. A replacement worker joins through
// Register and takes the same path from Connect on.
//
//   InJobRecovery recovery(comm, session, position, options);
//   RETURN_IF_ERROR(recovery.Connect());                 // the session's generation
//   for (;;) {
//     absl::Status st = TrainSomeSteps();                // recovery.OnStepCommitted() per step
//     if (st.ok() || !InJobRecovery::Recoverable(st)) return st;
//     RETURN_IF_ERROR(recovery.Recover(st));             // ABORTED: the job cannot recover
//   }
//
// Rank 0 prints one line per recovery, at the first step committed after it: who was lost and
// why (the coordinator's cause), the restarts used, how long it took, where the state came from,
// and the wall-clock time of that step (bench/recovery.sh reads it).
//
// While it lives, a heartbeat reply that names a newer generation interrupts the communication
// stage from the heartbeat thread (CommunicationStage::Interrupt).
//
// Thread safety: the training thread only (the interrupt hook is the one exception, above).
#ifndef SLURM_DDP_TRAINER_WORKER_IN_JOB_RECOVERY_H_
#define SLURM_DDP_TRAINER_WORKER_IN_JOB_RECOVERY_H_

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/failure_cause.h"
#include "trainer/worker/communication_stage.h"
#include "trainer/worker/coordinator_session.h"
#include "trainer/worker/test_hold.h"
#include "trainer/worker/training_position.h"

namespace ddp {

class InJobRecovery {
 public:
  struct Options {
    absl::Duration rejoin_timeout = absl::Seconds(120);  // one Rejoin answer at most
    int max_restarts = 0;                                // for the log line
    const TestHold* hold = nullptr;  // end-to-end tests: "rejoin", "connect" (test_hold.h)
    // Called once, after this worker's first committed step (an activated warm worker closes
    // its warm link then: trainer/launcher/warm_link.h).
    std::function<void()> on_first_step;
  };

  InJobRecovery(CommunicationStage& comm, CoordinatorSession& session, TrainingPosition& position,
                Options options);
  ~InJobRecovery();  // unhooks the heartbeat interrupt
  InJobRecovery(const InJobRecovery&) = delete;
  InJobRecovery& operator=(const InJobRecovery&) = delete;

  // Builds the group of the session's current generation; a recoverable failure on the way
  // (a peer lost while connecting) goes on as Recover.
  absl::Status Connect();
  // `why` ended the current group: abort it, rejoin, build the next one; again while building
  // fails recoverably. ABORTED with the coordinator's reason when the job cannot recover.
  absl::Status Recover(const absl::Status& why);
  // A failed collective or store call (UNAVAILABLE, DEADLINE_EXCEEDED: a peer is gone or the
  // coordinator announced a newer generation), which Recover handles.
  static bool Recoverable(const absl::Status& status);
  // Call after each committed step (cheap): prints the pending recovery line on rank 0, with the
  // step's breakdown (bench/recovery.sh reads it): `data_seconds` waiting for its batch, then the
  // DDP engine's timings. Without `data_seconds` (after the last step) no breakdown.
  void OnStepCommitted(std::optional<double> data_seconds = std::nullopt);

  int recoveries() const { return recoveries_; }

 private:
  struct Pending {
    int index = 0;       // 1 for the first recovery this worker saw
    FailureCause cause;  // the coordinator's
    int restarts = 0;
    double coordinator_seconds = 0;               // loss -> generation complete, at the coordinator
    std::chrono::steady_clock::time_point since;  // when this worker saw the failure (or began)
    bool replacement = false;  // this worker is a replacement (it saw no failure)
    int root = 0;
    int64_t root_step = 0;
    // This rank's own path, in seconds: `since` to the Rejoin's answer (-1: a replacement, which
    // registered instead), then the new process group's build and the state sync.
    double rejoin_seconds = -1;
    CommunicationStage::ConnectSeconds connect;
  };
  absl::Status ConnectOnce();

  CommunicationStage& comm_;
  CoordinatorSession& session_;
  TrainingPosition& position_;
  Options options_;  // on_first_step is cleared once called
  int recoveries_ = 0;
  std::optional<Pending> pending_;
};

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_WORKER_IN_JOB_RECOVERY_H_
