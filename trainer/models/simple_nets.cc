#include "trainer/models/simple_nets.h"

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

namespace ddp::models {
namespace {

namespace nn = torch::nn;

class Mlp : public ForwardModule {
 public:
  Mlp(int64_t inputs, int64_t num_classes)
      : fc1_(register_module("fc1", nn::Linear(inputs, 512))),
        fc2_(register_module("fc2", nn::Linear(512, 256))),
        fc3_(register_module("fc3", nn::Linear(256, num_classes))) {}

  at::Tensor forward(const at::Tensor& input) override {
    at::Tensor x = at::relu(fc1_(input.flatten(1)));
    return fc3_(at::relu(fc2_(x)));
  }

 private:
  nn::Linear fc1_, fc2_, fc3_;
};

nn::Conv2d Conv(int64_t in, int64_t out) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, 3).padding(1).bias(false));
}

class Cnn : public ForwardModule {
 public:
  Cnn(int64_t channels, int64_t height, int64_t width, int64_t num_classes)
      : conv1_(register_module("conv1", Conv(channels, 32))),
        bn1_(register_module("bn1", nn::BatchNorm2d(32))),
        conv2_(register_module("conv2", Conv(32, 32))),
        bn2_(register_module("bn2", nn::BatchNorm2d(32))),
        conv3_(register_module("conv3", Conv(32, 64))),
        bn3_(register_module("bn3", nn::BatchNorm2d(64))),
        conv4_(register_module("conv4", Conv(64, 64))),
        bn4_(register_module("bn4", nn::BatchNorm2d(64))),
        fc1_(register_module("fc1", nn::Linear(64 * (height / 4) * (width / 4), 256))),
        fc2_(register_module("fc2", nn::Linear(256, num_classes))) {}

  at::Tensor forward(const at::Tensor& input) override {
    at::Tensor x = at::relu(bn1_(conv1_(input)));
    x = at::max_pool2d(at::relu(bn2_(conv2_(x))), {2, 2});
    x = at::relu(bn3_(conv3_(x)));
    x = at::max_pool2d(at::relu(bn4_(conv4_(x))), {2, 2});
    return fc2_(at::relu(fc1_(x.flatten(1))));
  }

 private:
  nn::Conv2d conv1_;
  nn::BatchNorm2d bn1_;
  nn::Conv2d conv2_;
  nn::BatchNorm2d bn2_;
  nn::Conv2d conv3_;
  nn::BatchNorm2d bn3_;
  nn::Conv2d conv4_;
  nn::BatchNorm2d bn4_;
  nn::Linear fc1_, fc2_;
};

}  // namespace

std::shared_ptr<ForwardModule> MakeMlp(int64_t channels, int64_t height, int64_t width,
                                       int64_t num_classes) {
  return std::make_shared<Mlp>(channels * height * width, num_classes);
}

std::shared_ptr<ForwardModule> MakeCnn(int64_t channels, int64_t height, int64_t width,
                                       int64_t num_classes) {
  return std::make_shared<Cnn>(channels, height, width, num_classes);
}

}  // namespace ddp::models
