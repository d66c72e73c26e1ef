// The fused BatchNorm + ReLU (+ residual) op (trainer/models/fused_bn_relu.h) on the CPU: the
// kernels' formulas, in the kernels' merge order, against ATen's batch_norm + add + relu computed
// in double; the running statistics; the fallback when the op does not apply; and a ResNet built
// with it against one without (same state dict, same values). The CUDA kernels themselves are
// checked on a GPU by `ddp_gpu_bench --variants check` (bench/gpu/run.sh).
#include "trainer/models/fused_bn_relu.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "trainer/models/bn_relu_math.h"
#include "trainer/models/model_factory.h"

namespace ddp::models {
namespace {

namespace nn = torch::nn;

double MaxAbsDiff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// Scaled so that a tolerance reads as relative to the reference's magnitude.
double MaxRelDiff(const at::Tensor& a, const at::Tensor& b) {
  const double scale = std::max(b.to(at::kDouble).abs().max().item<double>(), 1e-12);
  return MaxAbsDiff(a, b) / scale;
}

struct Result {
  at::Tensor y, dx, dweight, dbias, dresidual, running_mean, running_var;
};

nn::BatchNorm2d MakeBn(int64_t channels, uint64_t seed) {
  torch::manual_seed(seed);
  nn::BatchNorm2d bn(channels);
  torch::NoGradGuard no_grad;
  bn->weight.uniform_(0.5, 1.5);
  bn->bias.uniform_(-0.5, 0.5);
  bn->running_mean.uniform_(-0.1, 0.1);
  bn->running_var.uniform_(0.9, 1.1);
  return bn;
}

// Our op on `x` (any type), `residual` (or undefined), with upstream gradient dy.
Result Fused(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& dy,
             nn::BatchNorm2d& bn) {
  const at::Tensor xv = x.detach().clone(at::MemoryFormat::ChannelsLast).requires_grad_(true);
  at::Tensor rv;
  if (residual.defined()) {
    rv = residual.detach().clone(at::MemoryFormat::ChannelsLast).requires_grad_(true);
  }
  EXPECT_EQ(FusedBatchNormReluUnsupported(xv, rv, *bn), "");
  bn->weight.mutable_grad() = at::Tensor();
  bn->bias.mutable_grad() = at::Tensor();
  at::Tensor y = FusedBatchNormRelu(xv, *bn, rv);
  y.backward(dy.to(y.scalar_type()));
  return {y.detach(),
          xv.grad(),
          bn->weight.grad().clone(),
          bn->bias.grad().clone(),
          rv.defined() ? rv.grad() : at::Tensor(),
          bn->running_mean.clone(),
          bn->running_var.clone()};
}

// ATen in double on the same values (x, residual and dy as our op read them).
Result Reference(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& dy,
                 const nn::BatchNorm2d& bn_in) {
  const at::Tensor xv = x.detach().to(at::kDouble).requires_grad_(true);
  const at::Tensor w = bn_in->weight.detach().to(at::kDouble).requires_grad_(true);
  const at::Tensor b = bn_in->bias.detach().to(at::kDouble).requires_grad_(true);
  at::Tensor rm = bn_in->running_mean.detach().to(at::kDouble);
  at::Tensor rvar = bn_in->running_var.detach().to(at::kDouble);
  at::Tensor res;
  if (residual.defined()) res = residual.detach().to(at::kDouble).requires_grad_(true);
  at::Tensor z = at::batch_norm(xv, w, b, rm, rvar, /*training=*/true,
                                bn_in->options.momentum().value(), bn_in->options.eps(), false);
  if (res.defined()) z = z + res;
  at::Tensor y = at::relu(z);
  y.backward(dy.to(x.scalar_type()).to(at::kDouble));
  return {y.detach(), xv.grad(), w.grad(), b.grad(), res.defined() ? res.grad() : at::Tensor(),
          rm,         rvar};
}

struct Case {
  at::ScalarType type;
  int64_t n, c, h, w;
  bool residual;
  double mean_offset;  // added to x: the statistics must not lose precision to it
  double tol_y, tol_grad;
};

std::string Name(const Case& k) {
  return absl::StrCat(c10::toString(k.type), " ", k.n, "x", k.c, "x", k.h, "x", k.w,
                      k.residual ? " +residual" : "", " offset ", k.mean_offset);
}

void CheckCase(const Case& k) {
  SCOPED_TRACE(Name(k));
  torch::manual_seed(7);
  const at::Tensor x = (torch::randn({k.n, k.c, k.h, k.w}) * 2 + k.mean_offset)
                           .to(k.type)
                           .contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor residual;
  if (k.residual) {
    residual =
        torch::randn({k.n, k.c, k.h, k.w}).to(k.type).contiguous(at::MemoryFormat::ChannelsLast);
  }
  const at::Tensor dy = torch::randn({k.n, k.c, k.h, k.w});
  nn::BatchNorm2d ours = MakeBn(k.c, 3);
  nn::BatchNorm2d theirs = MakeBn(k.c, 3);
  const Result want = Reference(x, residual, dy, theirs);
  const Result got = Fused(x, residual, dy, ours);

  EXPECT_EQ(got.y.scalar_type(), k.type);
  EXPECT_EQ(got.dx.scalar_type(), k.type);
  EXPECT_TRUE(got.y.is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_LE(MaxRelDiff(got.y, want.y), k.tol_y);
  EXPECT_LE(MaxRelDiff(got.dx, want.dx), k.tol_grad);
  EXPECT_LE(MaxRelDiff(got.dweight, want.dweight), k.tol_grad);
  EXPECT_LE(MaxRelDiff(got.dbias, want.dbias), k.tol_grad);
  if (k.residual) {
    EXPECT_LE(MaxRelDiff(got.dresidual, want.dresidual), k.tol_grad);
  }
  EXPECT_LE(MaxRelDiff(got.running_mean, want.running_mean), 1e-5);
  EXPECT_LE(MaxRelDiff(got.running_var, want.running_var), 1e-4);
  EXPECT_EQ(ours->num_batches_tracked.item<int64_t>(), 1);
  // The op must not be vacuous: some positions pass the ReLU and some do not.
  const double passed = (want.y > 0).to(at::kDouble).mean().item<double>();
  EXPECT_GT(passed, 0.05);
  EXPECT_LT(passed, 0.95);
}

TEST(FusedBatchNormReluTest, FloatMatchesAtenInDouble) {
  // 6*9*7 = 378 positions: two slabs of uneven lanes (PlanGrid on the CPU).
  CheckCase({at::kFloat, 6, 16, 9, 7, false, 0.0, 2e-6, 2e-5});
  CheckCase({at::kFloat, 6, 16, 9, 7, true, 0.0, 2e-6, 2e-5});
  CheckCase({at::kFloat, 4, 64, 16, 16, true, 0.0, 2e-6, 2e-5});
  CheckCase({at::kFloat, 5, 8, 1, 1, false, 0.0, 2e-6, 2e-5});
}

TEST(FusedBatchNormReluTest, StatisticsKeepPrecisionUnderALargeMean) {
  CheckCase({at::kFloat, 8, 32, 12, 12, false, 1000.0, 5e-4, 5e-3});
}

TEST(FusedBatchNormReluTest, ReducedPrecisionInputs) {
  // bf16/fp16 outputs round once (2^-8 / 2^-11 relative); the sums are float.
  CheckCase({at::kBFloat16, 4, 64, 10, 10, false, 0.0, 8e-3, 1.6e-2});
  CheckCase({at::kBFloat16, 4, 64, 10, 10, true, 0.5, 8e-3, 1.6e-2});
  CheckCase({at::kHalf, 4, 32, 10, 10, true, 0.0, 1e-3, 4e-3});
}

TEST(FusedBatchNormReluTest, PlanCoversEveryRowAndChannel) {
  for (const int64_t rows :
       {int64_t{1}, int64_t{255}, int64_t{256}, int64_t{100000}, int64_t{128} * 112 * 112}) {
    for (const int channels : {8, 64, 200, 2048}) {
      for (const int element_size : {2, 4}) {
        if (channels % (16 / element_size) != 0) continue;
        SCOPED_TRACE(absl::StrCat(rows, " rows ", channels, " channels ", element_size));
        const bn_relu::GridPlan p = bn_relu::PlanGrid(rows, channels, element_size, 528);
        EXPECT_EQ(p.groups * p.vec, channels);
        EXPECT_GE(p.tx * p.grid_x, p.groups);
        EXPECT_LE(p.tx * p.ty, 256);
        EXPECT_LE(p.ty, 32);
        EXPECT_GE(static_cast<int64_t>(p.slabs) * p.slab_rows, rows);
        EXPECT_LT(static_cast<int64_t>(p.slabs - 1) * p.slab_rows, rows);  // no empty slab
        EXPECT_LE(p.slabs, 65535);
        EXPECT_GE(p.apply_blocks_y, 1);
        EXPECT_LE(p.apply_blocks_y, 65535);
        EXPECT_LE(static_cast<int64_t>(p.apply_blocks_y - 1) * p.ty, rows);  // none idle
      }
    }
  }
}

TEST(FusedBatchNormReluTest, WelfordMergeIsExactForSplits) {
  // Merging the statistics of two halves gives those of the whole.
  const float values[] = {3.0f, -1.0f, 4.5f, 2.0f, 2.0f, 7.25f, -3.5f};
  bn_relu::Welford all, left, right;
  int i = 0;
  for (const float v : values) {
    bn_relu::Welford& half = i++ < 3 ? left : right;
    for (bn_relu::Welford* w : {&all, &half}) {
      w->count += 1;
      bn_relu::WelfordAdd(w->mean, w->m2, v, 1.0f / w->count);
    }
  }
  const bn_relu::Welford merged = bn_relu::WelfordMerge(left, right);
  EXPECT_EQ(merged.count, 7);
  EXPECT_NEAR(merged.mean, all.mean, 1e-6);
  EXPECT_NEAR(merged.m2, all.m2, 1e-4);
  EXPECT_EQ(bn_relu::WelfordMerge(bn_relu::Welford{}, left).mean, left.mean);
  EXPECT_EQ(bn_relu::WelfordMerge(left, bn_relu::Welford{}).m2, left.m2);
}

TEST(FusedBatchNormReluTest, FallsBackToTheModuleWhereItDoesNotApply) {
  nn::BatchNorm2d bn = MakeBn(16, 1);
  const at::Tensor cl = torch::randn({2, 16, 4, 4}).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor nchw = torch::randn({2, 16, 4, 4});
  EXPECT_EQ(FusedBatchNormReluUnsupported(cl, {}, *bn), "");
  EXPECT_NE(FusedBatchNormReluUnsupported(nchw, {}, *bn), "");
  EXPECT_NE(FusedBatchNormReluUnsupported(cl.to(at::kDouble), {}, *bn), "");
  EXPECT_NE(FusedBatchNormReluUnsupported(cl, nchw, *bn), "");
  // A view 2 floats into its storage: not 16-byte aligned for the kernels' vectors.
  const at::Tensor big = torch::randn({2 * 16 * 4 * 4 + 2});
  const at::Tensor shifted =
      big.narrow(0, 2, 2 * 16 * 4 * 4).view({2, 4, 4, 16}).permute({0, 3, 1, 2});
  ASSERT_TRUE(shifted.is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_EQ(FusedBatchNormReluUnsupported(shifted, {}, *bn), "input not 16-byte aligned");
  EXPECT_NE(
      FusedBatchNormReluUnsupported(
          torch::randn({2, 6, 4, 4}).contiguous(at::MemoryFormat::ChannelsLast), {}, *MakeBn(6, 1)),
      "");
  bn->eval();
  EXPECT_EQ(FusedBatchNormReluUnsupported(cl, {}, *bn), "eval mode");
  bn->train();

  // Where it does not apply, BatchNormRelu is the module's forward, the add and the ReLU.
  nn::BatchNorm2d a = MakeBn(16, 2);
  nn::BatchNorm2d b = MakeBn(16, 2);
  const at::Tensor r = torch::randn({2, 16, 4, 4});
  torch::NoGradGuard no_grad;
  const at::Tensor got = BatchNormRelu(nchw, *a, r, /*fused=*/true);
  const at::Tensor want = (b->forward(nchw) + r).relu();
  EXPECT_TRUE(at::equal(got, want));
  EXPECT_TRUE(at::equal(a->running_var, b->running_var));
}

// ResNet-18 and -50 with the fused op against without: the same parameters and buffers (names,
// values), and after a training-mode forward/backward the fused model is as close to the
// unfused model computed in double as the unfused float model is (float ATen's own rounding is
// the yardstick: deep BatchNorm stacks amplify it, by up to ~50% in some of ResNet-50's weight
// gradients on this small input).
TEST(FusedBatchNormReluTest, ResNetWithTheFusedOpIsAsAccurateAsWithout) {
  for (const std::string arch : {"resnet18", "resnet50"}) {
    SCOPED_TRACE(arch);
    std::unique_ptr<Model> models[3];  // plain float, fused float, plain double
    for (int k = 0; k < 3; ++k) {
      ModelOptions options;
      options.fused_bn_relu = k == 1;
      torch::manual_seed(11);
      auto created = CreateModel(arch, 10, {3, 64, 64}, options);
      ASSERT_TRUE(created.ok());
      models[k] = *std::move(created);
      models[k]->train(true);
      for (const auto& list : {models[k]->named_parameters(), models[k]->named_buffers()}) {
        for (const auto& t : list) {
          at::Tensor data = t.tensor.data();
          if (k == 2 && data.is_floating_point()) data = data.to(at::kDouble);
          if (data.dim() == 4) data = data.contiguous(at::MemoryFormat::ChannelsLast);
          t.tensor.set_data(data);
        }
      }
    }
    EXPECT_NE(models[1]->description().find("fused BatchNorm+ReLU"), std::string::npos);
    EXPECT_EQ(models[0]->description().find("fused"), std::string::npos);
    const auto plain = models[0]->named_parameters();
    const auto fused = models[1]->named_parameters();
    ASSERT_EQ(plain.size(), fused.size());
    for (size_t i = 0; i < plain.size(); ++i) {
      EXPECT_EQ(plain[i].name, fused[i].name);
      EXPECT_TRUE(at::equal(plain[i].tensor, fused[i].tensor));
    }
    torch::manual_seed(5);
    const at::Tensor x = torch::randn({8, 3, 64, 64}).contiguous(at::MemoryFormat::ChannelsLast);
    at::Tensor logits[3];
    for (int k = 0; k < 3; ++k) {
      logits[k] = models[k]->forward(k == 2 ? x.to(at::kDouble) : x);
      logits[k].pow(2).sum().backward();
    }
    EXPECT_LE(MaxRelDiff(logits[1], logits[2]), 2 * MaxRelDiff(logits[0], logits[2]) + 1e-6);
    // Per parameter, either rounding can land worse by chance; over all of them the fused op's
    // errors are those of float ATen's.
    const auto exact = models[2]->named_parameters();
    double sum_plain = 0, sum_fused = 0, worst_plain = 0, worst_fused = 0;
    for (size_t i = 0; i < plain.size(); ++i) {
      ASSERT_TRUE(fused[i].tensor.grad().defined()) << plain[i].name;
      const double e_plain = MaxRelDiff(plain[i].tensor.grad(), exact[i].tensor.grad());
      const double e_fused = MaxRelDiff(fused[i].tensor.grad(), exact[i].tensor.grad());
      sum_plain += e_plain;
      sum_fused += e_fused;
      worst_plain = std::max(worst_plain, e_plain);
      worst_fused = std::max(worst_fused, e_fused);
    }
    std::printf(
        "%s gradient error against double: mean %.3g (ATen float %.3g), worst %.3g (%.3g)\n",
        arch.c_str(), sum_fused / plain.size(), sum_plain / plain.size(), worst_fused, worst_plain);
    EXPECT_LE(sum_fused, 1.5 * sum_plain + 1e-6);
    EXPECT_LE(worst_fused, 1.5 * worst_plain + 1e-6);
    const auto plain_buffers = models[0]->named_buffers();
    const auto fused_buffers = models[1]->named_buffers();
    ASSERT_EQ(plain_buffers.size(), fused_buffers.size());
    for (size_t i = 0; i < plain_buffers.size(); ++i) {
      SCOPED_TRACE(plain_buffers[i].name);
      EXPECT_EQ(plain_buffers[i].name, fused_buffers[i].name);
      EXPECT_LE(MaxRelDiff(fused_buffers[i].tensor, plain_buffers[i].tensor), 1e-4);
    }
  }
}

}  // namespace
}  // namespace ddp::models
