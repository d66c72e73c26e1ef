#include "trainer/worker/step_rollback.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/ops/_foreach_copy.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/GradMode.h>

#include <mutex>

namespace ddp {

StepRollback::StepRollback(ModelStage& model) {
  for (const auto& b : model.tensors().buffers) {
    if (!b.tensor.defined()) continue;
    live_.push_back(b.tensor);
    saved_buffers_.push_back(at::empty_like(b.tensor));
  }
  generators_.push_back(at::detail::getDefaultCPUGenerator());
  const at::Device device = model.device();
  if (device.type() != at::kCPU) {
    generators_.push_back(at::globalContext().defaultGenerator(device));
  }
  saved_generators_.resize(generators_.size());
}

void StepRollback::Save() {
  c10::NoGradGuard no_grad;
  if (!live_.empty()) at::_foreach_copy_(saved_buffers_, live_);
  for (size_t i = 0; i < generators_.size(); ++i) {
    std::lock_guard<std::mutex> lock(generators_[i].mutex());
    saved_generators_[i] = generators_[i].get_state();
  }
  saved_ = true;
}

void StepRollback::Restore() {
  if (!saved_) return;
  c10::NoGradGuard no_grad;
  if (!live_.empty()) at::_foreach_copy_(live_, saved_buffers_);
  for (size_t i = 0; i < generators_.size(); ++i) {
    std::lock_guard<std::mutex> lock(generators_[i].mutex());
    generators_[i].set_state(saved_generators_[i]);
  }
}

}  // namespace ddp
