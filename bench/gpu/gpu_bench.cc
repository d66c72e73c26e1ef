// GPU check: world-1 NCCL DDP training of ResNet-50 (bf16 autocast, channels-last, synthetic
// batch of 224x224 images) with our reducer, for images/s; bench/gpu/gpu_bench.py runs PyTorch's
// Python DDP on the same GPU. Built standalone by bench/gpu/run.sh (no abseil/gRPC): the NCCL
// process group comes from trainer/dist/nccl_backend.cc, the factory path CreateProcessGroup
// takes, and first passes the same allreduce check as tests/trainer/dist/nccl_test.cc.
//   gpu_bench [steps] [warmup] [batch]
#include <ATen/autocast_mode.h>
#include <c10/cuda/CUDAFunctions.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <vector>

#include "trainer/dist/backend_factories.h"
#include "trainer/dist/reducer.h"

namespace {

namespace nn = torch::nn;

struct BottleneckImpl : nn::Module {
  BottleneckImpl(int64_t in, int64_t width, int64_t stride) {
    const int64_t out = width * 4;
    conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(in, width, 1).bias(false)));
    bn1 = register_module("bn1", nn::BatchNorm2d(width));
    conv2 = register_module(
        "conv2",
        nn::Conv2d(nn::Conv2dOptions(width, width, 3).stride(stride).padding(1).bias(false)));
    bn2 = register_module("bn2", nn::BatchNorm2d(width));
    conv3 = register_module("conv3", nn::Conv2d(nn::Conv2dOptions(width, out, 1).bias(false)));
    bn3 = register_module("bn3", nn::BatchNorm2d(out));
    if (stride != 1 || in != out) {
      downsample = register_module(
          "downsample",
          nn::Sequential(nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
                         nn::BatchNorm2d(out)));
    }
  }
  at::Tensor forward(const at::Tensor& x) {
    auto y = torch::relu(bn1->forward(conv1->forward(x)));
    y = torch::relu(bn2->forward(conv2->forward(y)));
    y = bn3->forward(conv3->forward(y));
    return torch::relu(y + (downsample ? downsample->forward(x) : x));
  }
  nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  nn::Sequential downsample{nullptr};
};
TORCH_MODULE(Bottleneck);

// torchvision.models.resnet50 (v1.5: stride in the 3x3 convolution).
struct ResNet50Impl : nn::Module {
  ResNet50Impl() {
    conv1 = register_module(
        "conv1", nn::Conv2d(nn::Conv2dOptions(3, 64, 7).stride(2).padding(3).bias(false)));
    bn1 = register_module("bn1", nn::BatchNorm2d(64));
    int64_t in = 64;
    const int64_t widths[4] = {64, 128, 256, 512};
    const int blocks[4] = {3, 4, 6, 3};
    for (int l = 0; l < 4; ++l) {
      nn::Sequential layer;
      for (int b = 0; b < blocks[l]; ++b) {
        layer->push_back(Bottleneck(in, widths[l], (b == 0 && l > 0) ? 2 : 1));
        in = widths[l] * 4;
      }
      layers.push_back(register_module("layer" + std::to_string(l + 1), layer));
    }
    fc = register_module("fc", nn::Linear(2048, 1000));
  }
  at::Tensor forward(const at::Tensor& x) {
    auto y = torch::relu(bn1->forward(conv1->forward(x)));
    y = torch::max_pool2d(y, 3, 2, 1);
    for (auto& layer : layers) y = layer->forward(y);
    return fc->forward(torch::adaptive_avg_pool2d(y, {1, 1}).flatten(1));
  }
  nn::Conv2d conv1{nullptr};
  nn::BatchNorm2d bn1{nullptr};
  std::vector<nn::Sequential> layers;
  nn::Linear fc{nullptr};
};
TORCH_MODULE(ResNet50);

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 50;
  const int warmup = argc > 2 ? std::atoi(argv[2]) : 10;
  const int64_t batch = argc > 3 ? std::atoll(argv[3]) : 128;
  if (!torch::cuda::is_available()) {
    std::fprintf(stderr, "gpu_bench: no CUDA device visible\n");
    return 1;
  }
  try {
    auto store = c10::make_intrusive<c10d::HashStore>();
    auto pg = ddp::internal::NewNcclBackend(store, 0, 1, std::chrono::seconds(120), 0);
    if (!pg) {
      std::fprintf(stderr, "gpu_bench: built without NCCL\n");
      return 1;
    }
    {  // The NCCL construction test (tests/trainer/dist/nccl_test.cc).
      std::vector<at::Tensor> t = {torch::arange(1024, torch::kFloat32).cuda()};
      pg->allreduce(t)->wait();
      if (!torch::equal(t[0].cpu(), torch::arange(1024, torch::kFloat32)) ||
          pg->getBackendName() != "nccl") {
        std::fprintf(stderr, "gpu_bench: NCCL allreduce check FAILED\n");
        return 1;
      }
      std::printf("NCCL_CHECK ok backend=%s\n", pg->getBackendName().c_str());
    }
    at::globalContext().setBenchmarkCuDNN(true);
    torch::manual_seed(0);
    ResNet50 model;
    model->to(torch::kCUDA);
    std::vector<std::string> names;
    std::vector<at::Tensor> params;
    {
      torch::NoGradGuard no_grad;
      for (auto& item : model->named_parameters()) {
        at::Tensor p = item.value();
        if (p.dim() == 4) p.set_data(p.data().contiguous(at::MemoryFormat::ChannelsLast));
        names.push_back(item.key());
        params.push_back(p);
      }
    }
    ddp::Reducer reducer(names, params, pg, ddp::ReducerOptions());
    torch::optim::SGD sgd(params, torch::optim::SGDOptions(0.01).momentum(0.9));
    auto x =
        torch::randn({batch, 3, 224, 224}, torch::kCUDA).contiguous(at::MemoryFormat::ChannelsLast);
    auto y = torch::randint(0, 1000, {batch},
                            torch::TensorOptions().device(torch::kCUDA).dtype(torch::kLong));
    std::chrono::steady_clock::time_point start;
    double wait = 0, overlap = 0;
    at::Tensor last_loss;
    for (int step = 0; step < warmup + steps; ++step) {
      if (step == warmup) {
        torch::cuda::synchronize();
        start = std::chrono::steady_clock::now();
      }
      at::Tensor loss;
      {
        at::autocast::set_autocast_enabled(at::kCUDA, true);
        at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
        loss = torch::cross_entropy_loss(model->forward(x), y);
        at::autocast::set_autocast_enabled(at::kCUDA, false);
        at::autocast::clear_cache();
      }
      reducer.MarkBackwardStart();
      loss.backward();
      last_loss = loss.detach();
      sgd.step();
      reducer.ZeroGrad();
      if (step >= warmup) {
        wait += reducer.last_timings().comm_wait_ms;
        overlap += reducer.last_timings().overlap_share;
      }
    }
    torch::cuda::synchronize();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf(
        "RESULT impl=cpp images_per_s=%.1f ms_per_step=%.2f buckets=%zu "
        "comm_wait_ms=%.3f overlap=%.2f loss=%.4f\n",
        steps * batch / seconds, seconds * 1000 / steps, reducer.bucket_assignment().size(),
        wait / steps, overlap / steps, last_loss.item<float>());
    pg->shutdown();
  } catch (const std::exception& e) {
    std::string what = e.what();
    std::fprintf(stderr, "gpu_bench failed: %s\n", what.substr(0, what.find('\n')).c_str());
    return 1;
  }
  return 0;
}
