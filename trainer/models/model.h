// The model interface the trainer, the DDP engine and checkpoints use, whatever the model is built
// from: a built-in architecture (torch::nn::Module, module_model.h) or a TorchScript module loaded
// from a file (script_model.h). Method names mirror PyTorch's (forward, parameters, train, eval,
// to, state_dict) rather than our CamelCase, so code reads like the Python it replaces.
//
// Tensors returned by parameters(), named_parameters(), named_buffers() and state_dict() share
// storage with the model: the optimizer updates them in place, DDP registers gradient hooks on the
// parameters and broadcasts parameters and buffers from rank 0 by copying into them.
//
// Thread safety: a Model is owned by one thread (the worker's training thread). No method may be
// called concurrently with another; autograd may run gradient hooks on its own threads during
// backward(), which is the DDP engine's concern.
#ifndef SLURM_DDP_TRAINER_MODELS_MODEL_H_
#define SLURM_DDP_TRAINER_MODELS_MODEL_H_

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "trainer/named_tensor.h"

namespace ddp::models {

using ::ddp::NamedTensor;

class Model {
 public:
  virtual ~Model() = default;

  // The model's output (logits [B, num_classes] for classifiers) for a batch.
  virtual at::Tensor forward(const at::Tensor& input) = 0;

  // Trainable parameters, in registration order (the order PyTorch's parameters() gives).
  virtual std::vector<at::Tensor> parameters() const = 0;
  virtual std::vector<NamedTensor> named_parameters() const = 0;
  // Buffers (BatchNorm running statistics and num_batches_tracked), in registration order.
  virtual std::vector<NamedTensor> named_buffers() const = 0;
  // Parameters and buffers in PyTorch's state_dict() order: for each module in pre-order, its own
  // parameters, then its own buffers. Keys match the Python model's state_dict keys.
  virtual std::vector<NamedTensor> state_dict() const = 0;

  // Training mode (BatchNorm uses batch statistics, dropout active) or evaluation mode.
  virtual void train(bool on) = 0;
  void eval() { train(false); }
  virtual bool is_training() const = 0;

  // Moves parameters and buffers to `device` (in place: tensors fetched before stay valid
  // handles only if the device did not change, so fetch parameters after moving).
  virtual void to(const c10::Device& device) = 0;

  // What the model is: "resnet50 (1000 classes)", "torchscript model.pt".
  virtual std::string description() const = 0;
};

}  // namespace ddp::models

#endif  // SLURM_DDP_TRAINER_MODELS_MODEL_H_
