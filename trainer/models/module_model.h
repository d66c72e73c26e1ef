// Model over a torch::nn::Module (the built-in architectures). The module must derive from
// ForwardModule, which adds the virtual forward the Model interface calls.
//
// Thread safety: as Model (one owning thread).
#ifndef SLURM_DDP_TRAINER_MODELS_MODULE_MODEL_H_
#define SLURM_DDP_TRAINER_MODELS_MODULE_MODEL_H_

#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <vector>

#include "trainer/models/model.h"

namespace ddp::models {

// A torch::nn::Module with a single-tensor forward.
class ForwardModule : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& input) = 0;
};

class ModuleModel : public Model {
 public:
  // torch::nn modules are shared_ptr-owned by design (submodule registration requires it).
  ModuleModel(std::shared_ptr<ForwardModule> module, std::string description);

  at::Tensor forward(const at::Tensor& input) override;
  std::vector<at::Tensor> parameters() const override;
  std::vector<NamedTensor> named_parameters() const override;
  std::vector<NamedTensor> named_buffers() const override;
  std::vector<NamedTensor> state_dict() const override;
  void train(bool on) override;
  bool is_training() const override;
  void to(const c10::Device& device) override;
  std::string description() const override { return description_; }

  ForwardModule& module() { return *module_; }

 private:
  std::shared_ptr<ForwardModule> module_;
  std::string description_;
};

}  // namespace ddp::models

#endif  // SLURM_DDP_TRAINER_MODELS_MODULE_MODEL_H_
