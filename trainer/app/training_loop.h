// The training loop of one worker: per epoch, the coordinator's shard assignment, the loader,
// one StepRunner step per batch (forward / backward with DDP / SGD), progress to the
// coordinator, the recipe's progress lines on rank 0, periodic and epoch-end checkpoints,
// evaluation, and a clean stop that every rank agrees on (a checkpoint-and-stop command,
// SIGTERM/SIGUSR1, --stop-after-steps, or a coordinator lost for --coordinator-grace; the
// agreement goes through the process group, trainer/worker/stop_agreement.h, every
// kStopCheckInterval steps and at each epoch's start). It trains from ctx.position and advances it
// step by step, so the position is always the last committed step and its place in the data.
//
// The loop reads the process group and the DDP engine through ctx.comm at every use, never
// keeping them, so that the communication stage can be rebuilt between steps. After an in-job
// recovery (trainer/worker/in_job_recovery.h) the caller runs the loop again on the same
// context: it goes on from ctx.position (the epoch in progress, at its synced batch; an
// evaluation that a failure interrupted is done again), and ctx.result keeps what earlier runs
// found (the last checkpoint, the accuracy) and ctx.run_start_step where this run began.
//
// Thread safety: runs on the worker's main thread; the stages it is given are used from there.
#ifndef SLURM_DDP_TRAINER_APP_TRAINING_LOOP_H_
#define SLURM_DDP_TRAINER_APP_TRAINING_LOOP_H_

#include <atomic>
#include <string>

#include "absl/status/statusor.h"
#include "trainer/checkpoint/checkpoint_store.h"
#include "trainer/launcher/config.h"
#include "trainer/worker/communication_stage.h"
#include "trainer/worker/coordinator_session.h"
#include "trainer/worker/data_stage.h"
#include "trainer/worker/in_job_recovery.h"
#include "trainer/worker/model_stage.h"
#include "trainer/worker/test_hold.h"
#include "trainer/worker/training_position.h"

namespace ddp {

// What the loop trains with: the worker's stages (worker.cc builds them, outermost first).
// kStopped and kCoordinatorLost: every rank agreed to stop after the same step and rank 0 wrote
// the stop checkpoint (when there is a --checkpoint-dir); kCoordinatorLost made no coordinator
// call after the agreement.
enum class LoopOutcome { kFinished, kStopped, kCoordinatorLost };

struct LoopResult {
  LoopOutcome outcome = LoopOutcome::kFinished;
  double final_top1 = -1;
  double final_top5 = -1;
  std::string checkpoint;  // last checkpoint written (rank 0)
};

struct TrainingContext {
  const TrainerConfig& config;
  const DataStage& data;
  ModelStage& model;
  CoordinatorSession& session;
  CommunicationStage& comm;
  TrainingPosition& position;            // where training starts; advanced as it goes
  const std::atomic<bool>& signal_stop;  // set by SIGTERM/SIGUSR1
  // Written by whichever rank is rank 0 (a survivor may become rank 0 in a recovery); may be null.
  CheckpointStore* checkpoints = nullptr;
  LoopResult& result;                 // filled as training goes (kept across recoveries)
  int64_t run_start_step = 0;         // the step this run of ddp-trainer began at
  InJobRecovery* recovery = nullptr;  // told of every committed step (may be null)
  const TestHold* hold = nullptr;     // end-to-end tests only (test_hold.h; may be null)
};

// Trains from ctx.position to config.epochs. Errors name what failed (a collective, the data, an
// abort from the coordinator naming the failed rank: code ABORTED; a newer membership generation
// announced by the coordinator: UNAVAILABLE, as a failed collective). LibTorch exceptions are
// left to the caller's boundary (status_from_exception.h).
absl::StatusOr<LoopResult> RunTrainingLoop(const TrainingContext& ctx);

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_APP_TRAINING_LOOP_H_
