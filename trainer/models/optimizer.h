// SGD with momentum, weight decay and optional Nesterov — exactly PyTorch's torch.optim.SGD
// (dampening 0) — and the learning-rate schedules of the recipe: x0.1 every N epochs ("step"),
// "cosine" over all steps, or "constant", each with optional linear warmup.
//
// Thread safety: owned by the training thread.
#ifndef SLURM_DDP_TRAINER_MODELS_OPTIMIZER_H_
#define SLURM_DDP_TRAINER_MODELS_OPTIMIZER_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/models/model.h"

namespace ddp {

struct SgdOptions {
  double momentum = 0.9;
  double weight_decay = 0.0;
  bool nesterov = false;
};

class Sgd {
 public:
  Sgd(std::vector<models::NamedTensor> params, SgdOptions options);

  // p -= lr * update(p.grad); parameters without a gradient are skipped, as in PyTorch.
  void Step(double lr);

  // Momentum buffers by parameter name (only those that exist), for checkpoints.
  std::vector<models::NamedTensor> MomentumBuffers() const;
  // Restores buffers saved by MomentumBuffers(); unknown or mis-shaped names are errors.
  std::string LoadMomentumBuffers(const std::vector<models::NamedTensor>& buffers);
  const SgdOptions& options() const { return options_; }

  // The whole optimizer state, one slot per parameter in construction order: its momentum
  // buffer, or an undefined tensor while the parameter has taken no step. State sync (state_sync.h)
  // reads and writes it to make a rank's optimizer equal to another's.
  const std::vector<models::NamedTensor>& parameters() const { return params_; }
  std::vector<at::Tensor>& momentum_slots() { return momentum_; }

 private:
  std::vector<models::NamedTensor> params_;
  std::vector<at::Tensor> momentum_;  // undefined until the first step, per parameter
  SgdOptions options_;
};

struct ScheduleOptions {
  std::string name = "step";  // step | cosine | constant
  double base_lr = 0.1;
  int64_t step_epochs = 30;  // step: x0.1 every step_epochs
  int64_t warmup_epochs = 0;
  int64_t epochs = 1;
  int64_t steps_per_epoch = 1;
};

// Learning rate for the optimizer step that follows `step` global steps (0-based), in `epoch`.
double LearningRate(const ScheduleOptions& s, int64_t epoch, int64_t step);

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_MODELS_OPTIMIZER_H_
