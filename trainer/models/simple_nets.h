// Small built-in architectures for quick runs and tests:
//   mlp  flatten -> fc1 (C*H*W -> 512) -> ReLU -> fc2 (512 -> 256) -> ReLU -> fc3 (-> classes)
//   cnn  two stages of [conv3x3 -> BN -> ReLU] x2 + 2x2 max pool (32 then 64 channels),
//        then fc1 (64*(H/4)*(W/4) -> 256) -> ReLU -> fc2 (-> classes). With SGD (momentum 0.9,
//        lr 0.05, global batch 256) the same network in Python reached 88.4% Fashion-MNIST test
//        accuracy after one epoch.
// Module and parameter names (conv1..conv4, bn1..bn4, fc1, fc2) match the equivalent Python
// definitions in tests/trainer/models/cnn_fashion_mnist.py, so state dicts line up.
//
// Thread safety: as any torch::nn::Module (one owning thread).
#ifndef SLURM_DDP_TRAINER_MODELS_SIMPLE_NETS_H_
#define SLURM_DDP_TRAINER_MODELS_SIMPLE_NETS_H_

#include <cstdint>
#include <memory>

#include "trainer/models/module_model.h"

namespace ddp::models {

std::shared_ptr<ForwardModule> MakeMlp(int64_t channels, int64_t height, int64_t width,
                                       int64_t num_classes);

// height and width must be at least 4.
std::shared_ptr<ForwardModule> MakeCnn(int64_t channels, int64_t height, int64_t width,
                                       int64_t num_classes);

}  // namespace ddp::models

#endif  // SLURM_DDP_TRAINER_MODELS_SIMPLE_NETS_H_
