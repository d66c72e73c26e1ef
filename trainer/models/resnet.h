// torchvision's ResNet-18/34/50 in LibTorch, built to line up with torchvision.models.resnetXX:
// the same module names, parameter and buffer names, shapes and registration order (conv1, bn1,
// layer1.0.conv1.weight, ..., fc.bias), so state dicts load either way. Initialization follows
// torchvision: Kaiming-normal (fan_out, relu) convolutions, BatchNorm weight 1 / bias 0,
// PyTorch's default Linear init for fc, and, like torchvision's default zero_init_residual=False,
// no zeroing of the last BatchNorm in each block unless asked.
//
// The ImageNet stem (7x7 stride-2 conv + 3x3 stride-2 max pool) is kept for every input size, so
// a 28x28 or 32x32 image reaches layer4 as 1x1 (the adaptive average pool handles any size). This
// is what torchvision's model does on small inputs too; it trains, but less well than a CIFAR
// stem. The first conv takes the input's channel count (1 for Fashion-MNIST), so its weight is
// [64, C, 7, 7]: with C == 3 it is exactly torchvision's.
//
// Thread safety: as any torch::nn::Module (one owning thread).
#ifndef SLURM_DDP_TRAINER_MODELS_RESNET_H_
#define SLURM_DDP_TRAINER_MODELS_RESNET_H_

#include <memory>
#include <vector>

#include "trainer/models/module_model.h"

namespace ddp::models {

struct ResNetOptions {
  enum class Block { kBasic, kBottleneck };
  Block block = Block::kBasic;
  std::vector<int> layers = {2, 2, 2, 2};  // blocks per stage
  int64_t num_classes = 1000;
  int64_t in_channels = 3;
  bool zero_init_residual = false;
  // BatchNorm, residual add and ReLU as one op where it applies (fused_bn_relu.h: training mode,
  // channels-last activations). The parameters and buffers are the same either way.
  bool fused_bn_relu = false;
};

ResNetOptions ResNet18Options();
ResNetOptions ResNet34Options();
ResNetOptions ResNet50Options();

std::shared_ptr<ForwardModule> MakeResNet(const ResNetOptions& options);

}  // namespace ddp::models

#endif  // SLURM_DDP_TRAINER_MODELS_RESNET_H_
