// The fused BatchNorm+ReLU CUDA kernels (trainer/models/bn_relu_kernels.cuh), compiled as C++
// and run on the CPU under tests/testing/cuda_emulation.h: one std::thread per CUDA thread, real
// barriers, the blocks of a grid one after another. Their results must be bitwise those of the
// op's CPU implementation for the same grid plan (the same formulas in the same order), over
// plans with one and several columns of blocks, a last column only partly used, more slabs than a
// block has lanes, lanes without rows, and every element type.
#include <torch/torch.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/cuda_emulation.h"
#include "trainer/models/bn_relu_kernels.cuh"
#include "trainer/models/bn_relu_math.h"

namespace ddp::models::bn_relu {
namespace {

struct Case {
  at::ScalarType type;
  int64_t rows;
  int channels;
  bool residual;
  int target_blocks;
  int apply_blocks_y;  // 0: the plan's (one block per ty rows); else fewer, each striding
};

ElementType TypeOf(at::ScalarType t) {
  return t == at::kHalf       ? ElementType::kHalf
         : t == at::kBFloat16 ? ElementType::kBFloat16
                              : ElementType::kFloat;
}

bool SameBytes(const at::Tensor& a, const at::Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

// One forward and backward through the emulated kernels and through CpuForward/CpuBackward.
void CheckCase(const Case& k) {
  GridPlan plan =
      PlanGrid(k.rows, k.channels, static_cast<int>(c10::elementSize(k.type)), k.target_blocks);
  if (k.apply_blocks_y > 0) plan.apply_blocks_y = k.apply_blocks_y;
  SCOPED_TRACE(absl::StrCat(c10::toString(k.type), " rows ", k.rows, " channels ", k.channels,
                            k.residual ? " +residual" : "", ": blocks ", plan.tx, "x", plan.ty,
                            ", grid ", plan.grid_x, "x", plan.slabs, ", slab ", plan.slab_rows,
                            ", elementwise grid y ", plan.apply_blocks_y));
  torch::manual_seed(static_cast<uint64_t>(k.rows * 31 + k.channels));
  const auto as = [&](at::Tensor t) { return t.to(k.type).contiguous(); };
  const at::Tensor x = as(torch::randn({k.rows, k.channels}) * 1.5 + 0.25);
  const at::Tensor r = as(torch::randn({k.rows, k.channels}));
  const at::Tensor dy = as(torch::randn({k.rows, k.channels}));
  const at::Tensor weight = torch::rand({k.channels}) + 0.5;
  const at::Tensor bias = torch::rand({k.channels}) - 0.5;
  const at::Tensor running_mean0 = torch::rand({k.channels}) * 0.1;
  const at::Tensor running_var0 = torch::rand({k.channels}) + 0.9;

  struct Run {
    at::Tensor y, saved, running_mean, running_var, dx, dr, dw, db;
  } runs[2];
  for (int emulated = 0; emulated < 2; ++emulated) {
    Run& out = runs[emulated];
    out.y = at::empty_like(x);
    out.saved = at::empty({4, k.channels});
    out.running_mean = running_mean0.clone();
    out.running_var = running_var0.clone();
    ForwardArgs f;
    f.type = TypeOf(k.type);
    f.x = x.data_ptr();
    f.residual = k.residual ? r.data_ptr() : nullptr;
    f.y = out.y.data_ptr();
    f.rows = k.rows;
    f.channels = k.channels;
    f.weight = weight.data_ptr<float>();
    f.bias = bias.data_ptr<float>();
    f.running_mean = out.running_mean.data_ptr<float>();
    f.running_var = out.running_var.data_ptr<float>();
    f.saved = out.saved.data_ptr<float>();
    f.eps = 1e-5f;
    f.momentum = 0.1f;
    // Garbage in the workspace: the kernels must not depend on it being zero.
    at::Tensor forward_ws = at::full({ForwardWorkspaceBytes(plan, k.channels) / 4}, 12345.0f);
    f.workspace = forward_ws.data_ptr();

    out.dx = at::empty_like(x);
    out.dr = at::empty_like(x);
    out.dw = at::empty({k.channels});
    out.db = at::empty({k.channels});
    BackwardArgs b;
    b.type = f.type;
    b.dy = dy.data_ptr();
    b.x = x.data_ptr();
    b.y = out.y.data_ptr();
    b.dx = out.dx.data_ptr();
    b.dresidual = k.residual ? out.dr.data_ptr() : nullptr;
    b.rows = k.rows;
    b.channels = k.channels;
    b.weight = weight.data_ptr<float>();
    b.saved = out.saved.data_ptr<float>();
    b.dweight = out.dw.data_ptr<float>();
    b.dbias = out.db.data_ptr<float>();
    at::Tensor backward_ws = at::full({BackwardWorkspaceBytes(plan, k.channels) / 4}, -7.0f);
    b.workspace = backward_ws.data_ptr();

    if (emulated == 1) {
      testing::cuda::Launcher launcher;
      ASSERT_EQ(kernels::LaunchForward(f, plan, launcher), 0);
      ASSERT_EQ(kernels::LaunchBackward(b, plan, launcher), 0);
      EXPECT_EQ(launcher.launches, 4);
      // The last block of each column reset its counter.
      const auto* counters = reinterpret_cast<const unsigned*>(
          forward_ws.data_ptr<float>() + ForwardWorkspaceFloats(plan, k.channels));
      for (int c = 0; c < plan.grid_x; ++c) EXPECT_EQ(counters[c], 0u);
    } else {
      CpuForward(f, plan);
      CpuBackward(b, plan);
    }
  }
  const Run& cpu = runs[0];
  const Run& kernel = runs[1];
  EXPECT_TRUE(SameBytes(kernel.saved, cpu.saved));
  EXPECT_TRUE(SameBytes(kernel.running_mean, cpu.running_mean));
  EXPECT_TRUE(SameBytes(kernel.running_var, cpu.running_var));
  EXPECT_TRUE(SameBytes(kernel.y, cpu.y));
  EXPECT_TRUE(SameBytes(kernel.dx, cpu.dx));
  EXPECT_TRUE(SameBytes(kernel.dw, cpu.dw));
  EXPECT_TRUE(SameBytes(kernel.db, cpu.db));
  if (k.residual) {
    EXPECT_TRUE(SameBytes(kernel.dr, cpu.dr));
  }
  // And both are BatchNorm: the mean they saved is the data's.
  const at::Tensor mean = x.to(at::kDouble).mean(0);
  EXPECT_LT((kernel.saved[0].to(at::kDouble) - mean).abs().max().item<double>(), 1e-4);
  EXPECT_GT((kernel.y.to(at::kFloat) > 0).sum().item<int64_t>(), 0);
}

TEST(BnReluEmulatedKernelsTest, MatchTheCpuImplementationBitwise) {
  // A block costs the emulation a few ms (a real barrier over up to 256 threads), so the
  // elementwise grids are mostly cut short: their threads then stride over many rows.
  const Case cases[] = {
      {at::kBFloat16, 2000, 64, false, 16, 0},   // one column, 8 slabs of 32 lanes, full grid
      {at::kBFloat16, 20000, 64, true, 200, 5},  // more slabs (79) than lanes: lanes merge several
      {at::kBFloat16, 300, 520, true, 16, 0},    // 65 groups: 3 columns, the last one lane wide
      {at::kBFloat16, 5, 16, false, 16, 0},      // fewer rows than lanes: lanes with nothing
      {at::kHalf, 1000, 128, true, 8, 3},       {at::kFloat, 777, 36, false, 12, 2},
      {at::kFloat, 1024, 2048, true, 528, 1},  // grid_x 16, ResNet-50's widest layer
  };
  for (const Case& k : cases) CheckCase(k);
}

}  // namespace
}  // namespace ddp::models::bn_relu
