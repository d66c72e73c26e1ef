// relu(batch_norm(x) [+ residual]) of a training-mode torch.nn.BatchNorm2d as one autograd op
// over channels-last activations (bn_relu_math.h has the formulas). On CUDA it is two kernels
// forward and two backward instead of ATen's BatchNorm, add and ReLU kernels: the activation is
// read and written fewer times (forward: 3 passes instead of 5, 4 instead of 8 with the residual;
// backward: 5 instead of 8 without it), which is most of what a ResNet step spends outside its
// convolutions. The CPU implementation runs the same formulas in the kernels' order, for tests;
// training on the CPU keeps ATen's ops (bitwise agreement with PyTorch).
//
//   at::Tensor y = BatchNormRelu(conv(x), *bn, residual, /*fused=*/true);
//
// Parameters, buffers and their updates are the module's own (weight, bias, running_mean,
// running_var, num_batches_tracked), so state dicts and checkpoints do not change.
//
// Thread safety: as the module (one owning thread).
#ifndef SLURM_DDP_TRAINER_MODELS_FUSED_BN_RELU_H_
#define SLURM_DDP_TRAINER_MODELS_FUSED_BN_RELU_H_

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/batchnorm.h>

#include <string>

namespace ddp::models {

// Empty when the fused op can run: bn in training mode, affine, tracking running statistics with
// a momentum; x 4-D channels-last contiguous, float/half/bfloat16, on the CPU or (with the
// kernels compiled in) CUDA, 16-byte aligned, C a multiple of 8 (4 for float), fewer than 2^24
// positions; the residual, if defined, of x's shape, type and layout. Otherwise why not, in a
// few words.
std::string FusedBatchNormReluUnsupported(const at::Tensor& x, const at::Tensor& residual,
                                          const torch::nn::BatchNorm2dImpl& bn);

// The fused op (requires FusedBatchNormReluUnsupported(...) empty). Updates bn's running
// statistics and num_batches_tracked as its forward would.
at::Tensor FusedBatchNormRelu(const at::Tensor& x, torch::nn::BatchNorm2dImpl& bn,
                              const at::Tensor& residual);

// relu(bn(x) [+ residual]): the fused op when `fused` and supported, else the module's forward,
// the in-place add and ReLU (torchvision's ResNet, bit for bit).
at::Tensor BatchNormRelu(const at::Tensor& x, torch::nn::BatchNorm2dImpl& bn,
                         const at::Tensor& residual, bool fused);

// Whether the CUDA kernels were compiled into this build.
bool FusedBatchNormReluHasCudaKernels();

}  // namespace ddp::models

#endif  // SLURM_DDP_TRAINER_MODELS_FUSED_BN_RELU_H_
