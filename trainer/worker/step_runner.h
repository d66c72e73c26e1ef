// One training step of a worker, phase by phase:
//
//   inputs to the device -> DDP step begins -> forward (under autocast when --bf16 on GPU) ->
//   loss -> backward (gradients averaged across ranks) -> optimizer -> the step is committed
//
// The step is committed (position.step advances) only once the optimizer ran. A step that fails
// anywhere before that (in its data, forward, allreduce, or the broadcast of rank 0's buffers)
// leaves the rank exactly at its last committed step: no gradients left over (ddp_step.h), and
// the buffers and random generators the forward changed put back as they were when the step
// began (step_rollback.h). That is the state in-job recovery syncs from (state_sync.h).
//
// Thread safety: the training thread only.
#ifndef SLURM_DDP_TRAINER_WORKER_STEP_RUNNER_H_
#define SLURM_DDP_TRAINER_WORKER_STEP_RUNNER_H_

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "trainer/data/dataset.h"
#include "trainer/worker/communication_stage.h"
#include "trainer/worker/model_stage.h"
#include "trainer/worker/progress_reporter.h"
#include "trainer/worker/step_rollback.h"
#include "trainer/worker/test_hold.h"
#include "trainer/worker/training_position.h"

namespace ddp {

// A batch's images as the model takes them: on its device, in its memory format.
at::Tensor ModelInput(const ModelStage& model, const at::Tensor& images);

struct StepOptions {
  bool bf16 = false;  // autocast forward to bfloat16 (CUDA only; ignored on CPU)
  // In-job recovery on a CUDA device: wait on the host for the gradients' reduction before the
  // optimizer runs, and fail the step (UNAVAILABLE, nothing applied) when the communication
  // stage was interrupted meanwhile. An NCCL collective aborted mid-way leaves garbage in its
  // buffers without an error; this keeps that garbage out of the weights, so that a rank's
  // committed step is always one its device finished (the state sync depends on it). Costs the
  // host's run-ahead into the next step (the optimizer is enqueued after the reduction ends).
  bool confirm_reduction = false;
  // Told of each phase as the step enters it (forward, backward, optimizer); may be null.
  ProgressReporter* phases = nullptr;
  // End-to-end tests: the "forward", "backward" and "optimizer" hold points (test_hold.h); may
  // be null.
  const TestHold* hold = nullptr;
};

struct StepResult {
  at::Tensor logits;  // for accuracy
  at::Tensor loss;
  at::Tensor labels;  // on the model's device
};

class StepRunner {
 public:
  StepRunner(ModelStage& model, CommunicationStage& comm, TrainingPosition& position,
             StepOptions options)
      : model_(model), comm_(comm), position_(position), options_(options), rollback_(model) {}

  // One optimizer step at learning rate `lr` on `batch` (this rank's share of the global batch).
  // Errors: a failed collective (UNAVAILABLE, DEADLINE_EXCEEDED), a model error (INTERNAL...).
  // Exceptions from LibTorch propagate to the worker's boundary.
  absl::StatusOr<StepResult> Run(const data::Batch& batch, double lr);

 private:
  struct Inputs {
    at::Tensor images, labels;
  };
  Inputs ToDevice(const data::Batch& batch) const;
  at::Tensor Forward(const at::Tensor& images);
  static at::Tensor Loss(const at::Tensor& logits, const at::Tensor& labels);
  // Enters `phase`: the stall rule's mark, and the test hold of that phase.
  void Mark(StepPhase phase);

  ModelStage& model_;
  CommunicationStage& comm_;
  TrainingPosition& position_;
  const StepOptions options_;
  StepRollback rollback_;
};

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_WORKER_STEP_RUNNER_H_
