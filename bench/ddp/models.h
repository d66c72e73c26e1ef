// Benchmark models, written to match bench/ddp/ddp_bench.py layer for layer: an MLP for
// MNIST-sized inputs and a CIFAR-style ResNet-18 (3x3 stem, no max-pool) for 32x32 inputs.
#ifndef SLURM_DDP_BENCH_DDP_MODELS_H_
#define SLURM_DDP_BENCH_DDP_MODELS_H_

#include <torch/torch.h>

#include <vector>

namespace ddp::bench {

inline torch::nn::Sequential Mlp(std::vector<int64_t> widths) {
  torch::nn::Sequential seq;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    seq->push_back(torch::nn::Linear(widths[i], widths[i + 1]));
    if (i + 2 < widths.size()) seq->push_back(torch::nn::ReLU());
  }
  return seq;
}

struct BasicBlockImpl : torch::nn::Module {
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride) {
    namespace nn = torch::nn;
    conv1 = register_module(
        "conv1", nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)));
    bn1 = register_module("bn1", nn::BatchNorm2d(out));
    conv2 =
        register_module("conv2", nn::Conv2d(nn::Conv2dOptions(out, out, 3).padding(1).bias(false)));
    bn2 = register_module("bn2", nn::BatchNorm2d(out));
    if (stride != 1 || in != out) {
      shortcut = register_module(
          "shortcut",
          nn::Sequential(nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
                         nn::BatchNorm2d(out)));
    }
  }
  at::Tensor forward(const at::Tensor& x) {
    auto y = torch::relu(bn1->forward(conv1->forward(x)));
    y = bn2->forward(conv2->forward(y));
    return torch::relu(y + (shortcut ? shortcut->forward(x) : x));
  }
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  torch::nn::Sequential shortcut{nullptr};
};
TORCH_MODULE(BasicBlock);

struct ResNet18Impl : torch::nn::Module {
  explicit ResNet18Impl(int64_t classes = 10) {
    namespace nn = torch::nn;
    conv1 =
        register_module("conv1", nn::Conv2d(nn::Conv2dOptions(3, 64, 3).padding(1).bias(false)));
    bn1 = register_module("bn1", nn::BatchNorm2d(64));
    int64_t in = 64;
    const int64_t widths[4] = {64, 128, 256, 512};
    for (int l = 0; l < 4; ++l) {
      nn::Sequential layer;
      for (int b = 0; b < 2; ++b) {
        layer->push_back(BasicBlock(in, widths[l], (b == 0 && l > 0) ? 2 : 1));
        in = widths[l];
      }
      layers.push_back(register_module("layer" + std::to_string(l + 1), layer));
    }
    fc = register_module("fc", nn::Linear(512, classes));
  }
  at::Tensor forward(const at::Tensor& x) {
    auto y = torch::relu(bn1->forward(conv1->forward(x)));
    for (auto& layer : layers) y = layer->forward(y);
    y = torch::adaptive_avg_pool2d(y, {1, 1}).flatten(1);
    return fc->forward(y);
  }
  torch::nn::Conv2d conv1{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr};
  std::vector<torch::nn::Sequential> layers;
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(ResNet18);

}  // namespace ddp::bench

#endif  // SLURM_DDP_BENCH_DDP_MODELS_H_
