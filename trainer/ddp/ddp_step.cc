#include "trainer/ddp/ddp_step.h"

#include <utility>

namespace ddp {

absl::StatusOr<DdpStep> DdpStep::Begin(DistributedDataParallel& ddp) {
  if (absl::Status st = ddp.BeginStep(); !st.ok()) return st;
  return DdpStep(&ddp);
}

DdpStep::DdpStep(DdpStep&& other) noexcept
    : ddp_(std::exchange(other.ddp_, nullptr)), phase_(other.phase_) {}

DdpStep::~DdpStep() {
  if (ddp_ == nullptr || phase_ == Phase::kDone) return;
  ddp_->ZeroGrad();  // abandoned: its gradients must not reach the next step
}

absl::Status DdpStep::Backward(const at::Tensor& loss) {
  if (phase_ != Phase::kForward) {
    return absl::FailedPreconditionError(
        "DDP step: Backward() must come once, after Begin() and before ApplyOptimizer()");
  }
  absl::Status st = ddp_->Backward(loss);
  phase_ = st.ok() ? Phase::kReduced : Phase::kFailed;
  return st;
}

absl::Status DdpStep::ApplyOptimizer(absl::FunctionRef<void()> optimizer_step) {
  if (phase_ != Phase::kReduced) {
    return absl::FailedPreconditionError(
        "DDP step: ApplyOptimizer() must come once, after a successful Backward()");
  }
  ddp_->BeginOptimizer();
  optimizer_step();
  ddp_->ZeroGrad();
  ddp_->EndOptimizer();
  phase_ = Phase::kDone;
  return absl::OkStatus();
}

}  // namespace ddp
