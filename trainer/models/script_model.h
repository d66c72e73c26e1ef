// Model over a TorchScript module (torch.jit.script / torch.jit.trace output saved with
// torch.jit.save), for --model PATH. forward() calls the module's forward with one tensor and
// expects one tensor back. Parameter and buffer names are the Python module's.
//
// Thread safety: as Model (one owning thread).
#ifndef SLURM_DDP_TRAINER_MODELS_SCRIPT_MODEL_H_
#define SLURM_DDP_TRAINER_MODELS_SCRIPT_MODEL_H_

#include <torch/csrc/jit/api/module.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/models/model.h"

namespace ddp::models {

class ScriptModel : public Model {
 public:
  // Loads PATH onto the CPU. Errors: NotFound for a missing file; InvalidArgument (one line,
  // naming the file) for a file that is not a TorchScript module or has no forward method.
  static absl::StatusOr<std::unique_ptr<ScriptModel>> Load(const std::string& path);

  at::Tensor forward(const at::Tensor& input) override;
  std::vector<at::Tensor> parameters() const override;
  std::vector<NamedTensor> named_parameters() const override;
  std::vector<NamedTensor> named_buffers() const override;
  std::vector<NamedTensor> state_dict() const override;
  void train(bool on) override;
  bool is_training() const override;
  void to(const c10::Device& device) override;
  std::string description() const override { return "torchscript " + path_; }

  torch::jit::Module& module() { return module_; }

 private:
  ScriptModel(torch::jit::Module module, std::string path);

  // torch::jit::Module is a handle; its methods are const but mutate the shared object.
  torch::jit::Module module_;
  std::string path_;
};

}  // namespace ddp::models

#endif  // SLURM_DDP_TRAINER_MODELS_SCRIPT_MODEL_H_
