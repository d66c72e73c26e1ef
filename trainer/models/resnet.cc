#include "trainer/models/resnet.h"

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/pooling.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <string>
#include <utility>

#include "trainer/models/fused_bn_relu.h"

namespace ddp::models {
namespace {

namespace nn = torch::nn;

nn::Conv2d Conv3x3(int64_t in, int64_t out, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false));
}

nn::Conv2d Conv1x1(int64_t in, int64_t out, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false));
}

// torchvision.models.resnet.BasicBlock (expansion 1) and Bottleneck (expansion 4, stride on the
// 3x3 conv as in torchvision's "ResNet V1.5"). Registration order is torchvision's.
class BlockImpl : public nn::Module {
 public:
  BlockImpl(ResNetOptions::Block kind, int64_t in, int64_t planes, int64_t stride,
            nn::Sequential downsample, bool fused)
      : bottleneck_(kind == ResNetOptions::Block::kBottleneck), fused_(fused) {
    if (bottleneck_) {
      conv1_ = register_module("conv1", Conv1x1(in, planes, 1));
      bn1_ = register_module("bn1", nn::BatchNorm2d(planes));
      conv2_ = register_module("conv2", Conv3x3(planes, planes, stride));
      bn2_ = register_module("bn2", nn::BatchNorm2d(planes));
      conv3_ = register_module("conv3", Conv1x1(planes, planes * 4, 1));
      bn3_ = register_module("bn3", nn::BatchNorm2d(planes * 4));
    } else {
      conv1_ = register_module("conv1", Conv3x3(in, planes, stride));
      bn1_ = register_module("bn1", nn::BatchNorm2d(planes));
      conv2_ = register_module("conv2", Conv3x3(planes, planes, 1));
      bn2_ = register_module("bn2", nn::BatchNorm2d(planes));
    }
    if (downsample) downsample_ = register_module("downsample", std::move(downsample));
  }

  // ReLU runs in place on BatchNorm outputs and on the residual sum, as torchvision's
  // (inplace=True): their backward needs neither, so this only saves allocations.
  at::Tensor forward(const at::Tensor& x) {
    if (fused_) {  // where the fused op does not apply, BatchNormRelu runs the module's ops
      at::Tensor out = BatchNormRelu(conv1_(x), *bn1_, {}, true);
      out = bottleneck_ ? conv3_(BatchNormRelu(conv2_(out), *bn2_, {}, true)) : conv2_(out);
      const at::Tensor identity = downsample_ ? downsample_->forward(x) : x;
      return BatchNormRelu(out, *last_bn(), identity, true);
    }
    at::Tensor out = bn1_(conv1_(x)).relu_();
    out = bn2_(conv2_(out));
    if (bottleneck_) out = bn3_(conv3_(at::relu_(out)));
    out += downsample_ ? downsample_->forward(x) : x;
    return at::relu_(out);
  }

  // The BatchNorm whose weight zero_init_residual zeroes.
  nn::BatchNorm2d& last_bn() { return bottleneck_ ? bn3_ : bn2_; }

 private:
  bool bottleneck_;
  bool fused_;
  nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr};
  nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr}, bn3_{nullptr};
  nn::Sequential downsample_{nullptr};
};
TORCH_MODULE(Block);

class ResNet : public ForwardModule {
 public:
  explicit ResNet(const ResNetOptions& options) : fused_(options.fused_bn_relu) {
    const int64_t expansion = options.block == ResNetOptions::Block::kBottleneck ? 4 : 1;
    conv1_ = register_module(
        "conv1",
        nn::Conv2d(nn::Conv2dOptions(options.in_channels, 64, 7).stride(2).padding(3).bias(false)));
    bn1_ = register_module("bn1", nn::BatchNorm2d(64));
    int64_t in = 64;
    const int64_t planes[4] = {64, 128, 256, 512};
    for (int stage = 0; stage < 4; ++stage) {
      nn::Sequential layer;
      const int64_t stride = stage == 0 ? 1 : 2;
      for (int b = 0; b < options.layers[static_cast<size_t>(stage)]; ++b) {
        const int64_t block_stride = b == 0 ? stride : 1;
        nn::Sequential downsample{nullptr};
        if (b == 0 && (stride != 1 || in != planes[stage] * expansion)) {
          downsample = nn::Sequential(Conv1x1(in, planes[stage] * expansion, stride),
                                      nn::BatchNorm2d(planes[stage] * expansion));
        }
        layer->push_back(Block(options.block, in, planes[stage], block_stride, downsample, fused_));
        in = planes[stage] * expansion;
      }
      layers_[stage] = register_module("layer" + std::to_string(stage + 1), layer);
    }
    fc_ = register_module("fc", nn::Linear(512 * expansion, options.num_classes));

    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* conv = module->as<nn::Conv2d>()) {
        nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
      } else if (auto* bn = module->as<nn::BatchNorm2d>()) {
        nn::init::ones_(bn->weight);
        nn::init::zeros_(bn->bias);
      }
    }
    if (options.zero_init_residual) {
      torch::NoGradGuard no_grad;
      for (auto& layer : layers_) {
        for (auto& block : *layer) nn::init::zeros_(block.get<BlockImpl>().last_bn()->weight);
      }
    }
  }

  at::Tensor forward(const at::Tensor& input) override {
    at::Tensor x =
        fused_ ? BatchNormRelu(conv1_(input), *bn1_, {}, true) : bn1_(conv1_(input)).relu_();
    x = at::max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
    for (auto& layer : layers_) x = layer->forward(x);
    x = at::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    return fc_(x);
  }

 private:
  bool fused_;
  nn::Conv2d conv1_{nullptr};
  nn::BatchNorm2d bn1_{nullptr};
  nn::Sequential layers_[4] = {nullptr, nullptr, nullptr, nullptr};
  nn::Linear fc_{nullptr};
};

}  // namespace

ResNetOptions ResNet18Options() { return ResNetOptions{}; }

ResNetOptions ResNet34Options() {
  ResNetOptions options;
  options.layers = {3, 4, 6, 3};
  return options;
}

ResNetOptions ResNet50Options() {
  ResNetOptions options;
  options.block = ResNetOptions::Block::kBottleneck;
  options.layers = {3, 4, 6, 3};
  return options;
}

std::shared_ptr<ForwardModule> MakeResNet(const ResNetOptions& options) {
  return std::make_shared<ResNet>(options);
}

}  // namespace ddp::models
