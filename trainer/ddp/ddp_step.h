// One DDP training step as a guard, so that the order begin -> backward -> optimizer -> end
// cannot be broken:
//
//   ASSIGN_OR_RETURN(DdpStep step, DdpStep::Begin(ddp));  // buffers from rank 0; forward timer
//   at::Tensor loss = criterion(model.forward(x), y);
//   RETURN_IF_ERROR(step.Backward(loss));                 // gradients averaged across ranks
//   RETURN_IF_ERROR(step.ApplyOptimizer([&] { sgd.Step(lr); }));  // then gradients cleared
//
// A call out of order is FAILED_PRECONDITION and changes nothing. A step that ends before its
// optimizer ran (an error, an exception, an early return) clears the gradients it produced, so a
// half-finished step never adds to the next one; the model and optimizer are untouched by it.
//
// Thread safety: the training thread only; `ddp` must outlive the step.
#ifndef SLURM_DDP_TRAINER_DDP_DDP_STEP_H_
#define SLURM_DDP_TRAINER_DDP_DDP_STEP_H_

#include <ATen/ATen.h>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/ddp/ddp.h"

namespace ddp {

class DdpStep {
 public:
  enum class Phase { kForward, kReduced, kDone, kFailed };

  static absl::StatusOr<DdpStep> Begin(DistributedDataParallel& ddp);

  DdpStep(DdpStep&& other) noexcept;
  DdpStep& operator=(DdpStep&&) = delete;
  DdpStep(const DdpStep&) = delete;
  DdpStep& operator=(const DdpStep&) = delete;
  ~DdpStep();

  // loss.backward() with gradient averaging. After an error the step is kFailed.
  absl::Status Backward(const at::Tensor& loss);
  // Runs `optimizer_step` between the optimizer timers, then clears the gradients.
  absl::Status ApplyOptimizer(absl::FunctionRef<void()> optimizer_step);

  Phase phase() const { return phase_; }

 private:
  explicit DdpStep(DistributedDataParallel* ddp) : ddp_(ddp) {}

  DistributedDataParallel* ddp_;  // not owned; null once moved from
  Phase phase_ = Phase::kForward;
};

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_DDP_DDP_STEP_H_
