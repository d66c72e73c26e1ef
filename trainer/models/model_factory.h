// Builds the model named by --arch, or loads the TorchScript module named by --model.
//
//   CreateModel("resnet50", 1000, {3, 224, 224})
//   LoadScriptModel("model.pt")
//
// Architectures: mlp, cnn (simple_nets.h), resnet18, resnet34, resnet50 (resnet.h, torchvision-
// compatible). Models are built on the CPU with their initial weights drawn from torch's global
// generator (seed it with torch::manual_seed for reproducible initial weights; DDP broadcasts
// rank 0's weights anyway).
//
// Thread safety: free functions; call from one thread at a time (they use torch's global
// generator).
#ifndef SLURM_DDP_TRAINER_MODELS_MODEL_FACTORY_H_
#define SLURM_DDP_TRAINER_MODELS_MODEL_FACTORY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/models/model.h"

namespace ddp::models {

struct InputShape {
  int64_t channels = 3;
  int64_t height = 224;
  int64_t width = 224;
};

// How a built-in architecture is built beyond its shape.
struct ModelOptions {
  // ResNets: BatchNorm + (residual add +) ReLU fused into one op on channels-last CUDA
  // activations (resnet.h); ignored by the other architectures.
  bool fused_bn_relu = false;
};

// The valid --arch names, in the order they are listed in errors and help.
const std::vector<std::string>& ModelArchs();

// Errors: InvalidArgument for an unknown arch (listing the valid ones), num_classes < 1, or an
// input shape the arch cannot take.
absl::StatusOr<std::unique_ptr<Model>> CreateModel(const std::string& arch, int64_t num_classes,
                                                   const InputShape& input,
                                                   const ModelOptions& options = {});

// --model PATH. Errors as ScriptModel::Load.
absl::StatusOr<std::unique_ptr<Model>> LoadScriptModel(const std::string& path);

}  // namespace ddp::models

#endif  // SLURM_DDP_TRAINER_MODELS_MODEL_FACTORY_H_
