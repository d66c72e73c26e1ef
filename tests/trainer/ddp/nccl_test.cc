// Constructs ProcessGroupNCCL through the trainer's factory and runs an allreduce on the GPU.
// Compiling and linking this file in CI (no GPU) is the proof that the NCCL path builds; the
// test itself runs where a GPU is present and skips with the reason otherwise.
#include <torch/cuda.h>
#include <torch/torch.h>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "gtest/gtest.h"
#include "trainer/ddp/process_group.h"

namespace ddp {
namespace {

TEST(NcclProcessGroup, ConstructsAndAllreducesOnGpu) {
  ASSERT_TRUE(NcclCompiledIn()) << "this build has no NCCL";
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no GPU: ProcessGroupNCCL was compiled and linked but cannot run here";
  }
  auto store = c10::make_intrusive<c10d::HashStore>();
  ProcessGroupOptions options;
  options.backend = BackendKind::kAuto;
  ASSERT_EQ(ResolveBackendKind(options.backend), BackendKind::kNccl);
  options.timeout = std::chrono::seconds(60);
  auto pg = CreateProcessGroup(store, 0, 1, options);
  ASSERT_TRUE(pg.ok()) << pg.status();
  EXPECT_EQ((*pg)->getBackendName(), "nccl");
  std::vector<at::Tensor> t = {torch::arange(1024, torch::kFloat32).cuda()};
  (*pg)->allreduce(t)->wait();
  EXPECT_TRUE(torch::equal(t[0].cpu(), torch::arange(1024, torch::kFloat32)));
  (*pg)->shutdown();
}

}  // namespace
}  // namespace ddp
