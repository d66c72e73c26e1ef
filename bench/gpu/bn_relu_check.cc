// `ddp_gpu_bench --variants check`: the fused BatchNorm+ReLU CUDA kernels
// (trainer/models/fused_bn_relu.h) on ResNet-50's activation shapes, against ATen's BatchNorm, add
// and ReLU on the same GPU, both measured against a double-precision reference on the CPU; and
// against the op's own CPU implementation (the same formulas). Then fused against ATen per layer
// in microseconds (forward + backward, batch 128). Prints one CHECK line per case and a summary
// line; returns the number of failed cases.
#include "bench/gpu/bn_relu_check.h"

#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "trainer/models/fused_bn_relu.h"

namespace ddp::bench {
namespace {

namespace nn = torch::nn;

struct Outputs {
  at::Tensor y, dx, dw, db, dr;
};

double RelErr(const at::Tensor& got, const at::Tensor& want) {
  const at::Tensor g = got.to(at::kCPU, at::kDouble);
  const at::Tensor w = want.to(at::kCPU, at::kDouble);
  return (g - w).abs().max().item<double>() / std::max(w.abs().max().item<double>(), 1e-12);
}

nn::BatchNorm2d MakeBn(int64_t channels, at::Device device) {
  torch::manual_seed(3);
  nn::BatchNorm2d bn(channels);
  {
    torch::NoGradGuard no_grad;
    bn->weight.uniform_(0.5, 1.5);
    bn->bias.uniform_(-0.5, 0.5);
  }
  bn->to(device);
  return bn;
}

// relu(bn(x) [+ r]): the fused op, or ATen's module, add and ReLU.
at::Tensor Apply(bool fused, const at::Tensor& x, nn::BatchNorm2d& bn, const at::Tensor& r) {
  return fused ? models::FusedBatchNormRelu(x, *bn, r)
               : models::BatchNormRelu(x, *bn, r, /*fused=*/false);
}

// "CHECK <check> case=<name> FAIL error=<first line>".
void PrintFailure(const char* check, const char* name, const std::exception& e) {
  const std::string what = e.what();
  std::printf("CHECK %s case=%s FAIL error=%s\n", check, name,
              what.substr(0, what.find('\n')).c_str());
}

// Forward and backward on `device` (inputs cloned there in `type`).
Outputs Run(bool fused, const at::Tensor& x, const at::Tensor& r, const at::Tensor& dy,
            at::Device device, at::ScalarType type) {
  nn::BatchNorm2d bn = MakeBn(x.size(1), device);
  auto prep = [&](const at::Tensor& t) {
    return t.to(device, type).contiguous(at::MemoryFormat::ChannelsLast).requires_grad_(true);
  };
  const at::Tensor xv = prep(x);
  const at::Tensor rv = r.defined() ? prep(r) : at::Tensor();
  at::Tensor y = Apply(fused, xv, bn, rv);
  y.backward(dy.to(device, type).contiguous(at::MemoryFormat::ChannelsLast));
  return {y.detach(), xv.grad(), bn->weight.grad(), bn->bias.grad(),
          rv.defined() ? rv.grad() : at::Tensor()};
}

// The double-precision reference on the CPU, from the values as rounded to `type`.
Outputs Exact(const at::Tensor& x, const at::Tensor& r, const at::Tensor& dy, at::ScalarType type) {
  nn::BatchNorm2d bn = MakeBn(x.size(1), at::kCPU);
  bn->to(at::kDouble);
  auto prep = [&](const at::Tensor& t) { return t.to(type).to(at::kDouble).requires_grad_(true); };
  const at::Tensor xv = prep(x);
  const at::Tensor rv = r.defined() ? prep(r) : at::Tensor();
  at::Tensor z = bn->forward(xv);
  if (rv.defined()) z = z + rv;
  at::Tensor y = at::relu(z);
  y.backward(dy.to(type).to(at::kDouble));
  return {y.detach(), xv.grad(), bn->weight.grad(), bn->bias.grad(),
          rv.defined() ? rv.grad() : at::Tensor()};
}

double WorstErr(const Outputs& got, const Outputs& want) {
  double e = std::max({RelErr(got.y, want.y), RelErr(got.dx, want.dx), RelErr(got.dw, want.dw),
                       RelErr(got.db, want.db)});
  if (want.dr.defined()) e = std::max(e, RelErr(got.dr, want.dr));
  return e;
}

struct Case {
  const char* name;
  at::ScalarType type;
  int64_t n, c, h, w;
  bool residual;
};

// Forward + backward, microseconds per iteration (after 3 warm-up iterations).
double TimeUs(bool fused, const at::Tensor& x, const at::Tensor& r, const at::Tensor& dy) {
  nn::BatchNorm2d bn = MakeBn(x.size(1), x.device());
  const at::Tensor xv = x.detach().requires_grad_(true);
  const at::Tensor rv = r.defined() ? r.detach().requires_grad_(true) : at::Tensor();
  auto once = [&] {
    at::Tensor y = Apply(fused, xv, bn, rv);
    y.backward(dy);
    xv.mutable_grad() = at::Tensor();
    if (rv.defined()) rv.mutable_grad() = at::Tensor();
  };
  for (int i = 0; i < 3; ++i) once();
  torch::cuda::synchronize();
  constexpr int kIters = 20;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kIters; ++i) once();
  torch::cuda::synchronize();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
             .count() /
         kIters;
}

}  // namespace

int RunBnReluCheck() {
  if (!models::FusedBatchNormReluHasCudaKernels()) {
    std::printf("CHECK bn_relu SKIP reason=built_without_nvcc\n");
    return 0;
  }
  const at::Device gpu(at::kCUDA, 0);
  const Case cases[] = {
      {"stem-like", at::kBFloat16, 16, 64, 56, 56, false},
      {"layer1-out", at::kBFloat16, 16, 256, 56, 56, true},
      {"layer2-out", at::kBFloat16, 16, 512, 28, 28, true},
      {"layer4-out", at::kBFloat16, 16, 2048, 7, 7, true},
      {"layer3-mid", at::kBFloat16, 16, 256, 14, 14, false},
      {"fp32", at::kFloat, 8, 64, 28, 28, true},
      {"fp16", at::kHalf, 8, 128, 28, 28, true},
  };
  int failed = 0;
  for (const Case& k : cases) {
    torch::manual_seed(7);
    const at::Tensor x = torch::randn({k.n, k.c, k.h, k.w}) * 2 + 0.3;
    const at::Tensor r = k.residual ? torch::randn({k.n, k.c, k.h, k.w}) : at::Tensor();
    const at::Tensor dy = torch::randn({k.n, k.c, k.h, k.w});
    try {
      const Outputs exact = Exact(x, r, dy, k.type);
      const Outputs aten = Run(false, x, r, dy, gpu, k.type);
      const Outputs fused = Run(true, x, r, dy, gpu, k.type);
      const Outputs cpu = Run(true, x, r, dy, at::kCPU, k.type);
      const double e_aten = WorstErr(aten, exact);
      const double e_fused = WorstErr(fused, exact);
      const double e_cpu = WorstErr(fused, cpu);
      // As close to the exact values as ATen's kernels are (bf16 outputs round at 2^-9).
      const bool ok = e_fused <= 2 * e_aten + 1e-3;
      if (!ok) ++failed;
      std::printf(
          "CHECK bn_relu case=%s type=%s shape=%ldx%ldx%ldx%ld residual=%d %s err_fused=%.3g "
          "err_aten=%.3g fused_vs_cpu_impl=%.3g\n",
          k.name, c10::toString(k.type), static_cast<long>(k.n), static_cast<long>(k.c),
          static_cast<long>(k.h), static_cast<long>(k.w), k.residual ? 1 : 0, ok ? "PASS" : "FAIL",
          e_fused, e_aten, e_cpu);
    } catch (const std::exception& e) {
      ++failed;
      PrintFailure("bn_relu", k.name, e);
    }
    std::fflush(stdout);
  }
  // Per-layer time at ResNet-50's batch-128 shapes, bf16 channels-last.
  double fused_total = 0;
  double aten_total = 0;
  const Case timed[] = {{"b128-c64-56", at::kBFloat16, 128, 64, 56, 56, false},
                        {"b128-c256-56+res", at::kBFloat16, 128, 256, 56, 56, true},
                        {"b128-c1024-14+res", at::kBFloat16, 128, 1024, 14, 14, true}};
  for (const Case& k : timed) {
    try {
      auto opts = at::TensorOptions().device(gpu).dtype(k.type);
      auto make = [&] {
        return torch::randn({k.n, k.c, k.h, k.w}, opts).contiguous(at::MemoryFormat::ChannelsLast);
      };
      const at::Tensor x = make();
      const at::Tensor r = k.residual ? make() : at::Tensor();
      const at::Tensor dy = make();
      const double aten_us = TimeUs(false, x, r, dy);
      const double fused_us = TimeUs(true, x, r, dy);
      aten_total += aten_us;
      fused_total += fused_us;
      std::printf("CHECK bn_relu_time case=%s aten_us=%.1f fused_us=%.1f speedup=%.2f\n", k.name,
                  aten_us, fused_us, aten_us / fused_us);
    } catch (const std::exception& e) {
      ++failed;
      PrintFailure("bn_relu_time", k.name, e);
    }
    std::fflush(stdout);
  }
  std::printf("CHECK bn_relu_summary failed=%d time_speedup=%.2f\n", failed,
              fused_total > 0 ? aten_total / fused_total : 0.0);
  std::fflush(stdout);
  return failed;
}

}  // namespace ddp::bench
