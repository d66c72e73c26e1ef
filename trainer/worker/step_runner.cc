#include "trainer/worker/step_runner.h"

#include <ATen/ops/cross_entropy_loss.h>
#include <torch/cuda.h>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "common/status_macros.h"
#include "trainer/ddp/ddp_step.h"
#include "trainer/worker/autocast_guard.h"

namespace ddp {

void StepRunner::Mark(StepPhase phase) {
  if (options_.phases != nullptr) options_.phases->MarkPhase(phase);
  if (options_.hold == nullptr) return;
  const std::optional<TestHold::Point> point = TestHold::PointOfPhase(phase);
  if (point) options_.hold->At(*point, comm_.process_group().getRank(), position_.step);
}

absl::StatusOr<StepResult> StepRunner::Run(const data::Batch& batch, double lr) {
  rollback_.Save();
  bool committed = false;
  // Whatever ends the step before its commit (an error, an exception) leaves the buffers and
  // generators as they were when it began.
  absl::Cleanup roll_back = [&] {
    if (!committed) rollback_.Restore();
  };
  Mark(StepPhase::kForward);
  const Inputs in = ToDevice(batch);
  ASSIGN_OR_RETURN(DdpStep step, DdpStep::Begin(comm_.ddp()));
  at::Tensor logits = Forward(in.images);
  at::Tensor loss = Loss(logits, in.labels);
  Mark(StepPhase::kBackward);  // its gradient allreduce waits are marked by WaitForWork's hook
  RETURN_IF_ERROR(step.Backward(loss));
  if (options_.confirm_reduction && model_.device().is_cuda()) {
    // The host waits for the gradients' reduction: to the stall rule, a collective wait.
    if (options_.phases != nullptr) options_.phases->MarkCollectiveWait(true);
    torch::cuda::synchronize(model_.device().index());
    if (options_.phases != nullptr) options_.phases->MarkCollectiveWait(false);
  }
  if (comm_.interrupted()) {
    // DdpStep's destructor clears the gradients of a step that never reached its optimizer.
    return absl::UnavailableError(
        "the step was interrupted: a newer membership generation is forming");
  }
  Mark(StepPhase::kOptimizer);
  RETURN_IF_ERROR(step.ApplyOptimizer([&] { model_.optimizer().Step(lr); }));
  ++position_.step;
  committed = true;
  return StepResult{std::move(logits), std::move(loss), in.labels};
}

at::Tensor ModelInput(const ModelStage& model, const at::Tensor& images) {
  at::Tensor x = images.to(model.device(), /*non_blocking=*/true);
  if (model.channels_last() && x.dim() == 4) x = x.contiguous(at::MemoryFormat::ChannelsLast);
  return x;
}

StepRunner::Inputs StepRunner::ToDevice(const data::Batch& batch) const {
  return {ModelInput(model_, batch.images),
          batch.labels.to(model_.device(), /*non_blocking=*/true)};
}

at::Tensor StepRunner::Forward(const at::Tensor& images) {
  const at::Device device = model_.device();
  AutocastGuard autocast(device.type(), at::kBFloat16, options_.bf16 && device.is_cuda());
  return model_.model().forward(images);
}

at::Tensor StepRunner::Loss(const at::Tensor& logits, const at::Tensor& labels) {
  return at::cross_entropy_loss(logits.to(at::kFloat), labels);
}

}  // namespace ddp
