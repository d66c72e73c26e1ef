// AutocastGuard on the CPU (the same code path as CUDA, another device type): autocast is on for
// the guard's scope only, the previous state comes back on an exception, and nesting works.
#include "trainer/worker/autocast_guard.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <stdexcept>

#include "gtest/gtest.h"

namespace ddp {
namespace {

at::ScalarType MatmulType() {
  return torch::mm(torch::ones({2, 2}), torch::ones({2, 2})).scalar_type();
}

TEST(AutocastGuard, CastsOnlyInsideItsScope) {
  ASSERT_FALSE(at::autocast::is_autocast_enabled(at::kCPU));
  const at::ScalarType default_dtype = at::autocast::get_autocast_dtype(at::kCPU);
  EXPECT_EQ(MatmulType(), at::kFloat);
  {
    AutocastGuard autocast(at::kCPU, at::kBFloat16, true);
    EXPECT_TRUE(at::autocast::is_autocast_enabled(at::kCPU));
    EXPECT_EQ(MatmulType(), at::kBFloat16);
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(at::kCPU));
  EXPECT_EQ(at::autocast::get_autocast_dtype(at::kCPU), default_dtype);
  EXPECT_EQ(MatmulType(), at::kFloat);
}

TEST(AutocastGuard, AnExceptionLeavesAutocastOff) {
  try {
    AutocastGuard autocast(at::kCPU, at::kBFloat16, true);
    throw std::runtime_error("forward failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(at::kCPU));
  EXPECT_EQ(MatmulType(), at::kFloat);
}

TEST(AutocastGuard, DisabledDoesNothingAndNestedRestoresTheOuterState) {
  {
    AutocastGuard off(at::kCPU, at::kBFloat16, false);
    EXPECT_FALSE(at::autocast::is_autocast_enabled(at::kCPU));
  }
  {
    AutocastGuard outer(at::kCPU, at::kBFloat16, true);
    {
      AutocastGuard inner(at::kCPU, at::kHalf, true);
      EXPECT_EQ(at::autocast::get_autocast_dtype(at::kCPU), at::kHalf);
    }
    EXPECT_TRUE(at::autocast::is_autocast_enabled(at::kCPU));
    EXPECT_EQ(at::autocast::get_autocast_dtype(at::kCPU), at::kBFloat16);
    EXPECT_EQ(MatmulType(), at::kBFloat16);
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(at::kCPU));
}

}  // namespace
}  // namespace ddp
