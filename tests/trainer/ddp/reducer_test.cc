// Unit tests of the reducer: PyTorch's bucket assignment rule, and a world-1 DDP step that
// leaves param.grad() as a view into its bucket with the unchanged gradient.
#include "trainer/ddp/reducer.h"

#include <torch/torch.h>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "gtest/gtest.h"
#include "trainer/ddp/ddp.h"
#include "trainer/ddp/process_group.h"

namespace ddp {
namespace {

TEST(ComputeBuckets, FollowsPyTorchRule) {
  // 4 float tensors of 256 elements (1 KiB each) and one double tensor of 64 (512 B).
  std::vector<at::Tensor> params = {torch::zeros({256}), torch::zeros({256}), torch::zeros({256}),
                                    torch::zeros({64}, torch::kDouble), torch::zeros({256})};
  const std::vector<size_t> reverse = {4, 3, 2, 1, 0};
  struct Case {
    int64_t first, rest;
    std::vector<std::vector<size_t>> want;
  };
  const std::vector<Case> cases = {
      {-1, -1, {{4}, {3}, {2}, {1}, {0}}},     // one per parameter
      {0, 0, {{4, 2, 1, 0}, {3}}},             // one per dtype
      {1024, 2048, {{4}, {3}, {2, 1}, {0}}},   // first 1 KiB, then 2 KiB
      {2048, 1 << 20, {{4, 2}, {3}, {1, 0}}},  // float bucket closes at 2 KiB
  };
  for (const auto& c : cases) {
    EXPECT_EQ(Reducer::ComputeBuckets(params, reverse, c.first, c.rest), c.want)
        << c.first << "/" << c.rest;
  }
  // Another order (as after the rebuild) is followed as given.
  EXPECT_EQ(Reducer::ComputeBuckets(params, {0, 1, 2, 3, 4}, -1, -1),
            (std::vector<std::vector<size_t>>{{0}, {1}, {2}, {3}, {4}}));
}

TEST(Reducer, WorldOneLeavesGradientsAsBucketViews) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  ProcessGroupOptions options;
  options.backend = BackendKind::kGloo;
  options.gloo_hostname = "127.0.0.1";
  auto pg = CreateProcessGroup(store, 0, 1, options);
  ASSERT_TRUE(pg.ok()) << pg.status();
  torch::manual_seed(0);
  auto model = torch::nn::Linear(8, 3);
  auto reference = torch::nn::Linear(8, 3);
  {
    torch::NoGradGuard no_grad;
    reference->weight.copy_(model->weight);
    reference->bias.copy_(model->bias);
  }
  auto created = DistributedDataParallel::Create(TensorsOf(*model), *pg);
  ASSERT_TRUE(created.ok()) << created.status();
  auto x = torch::randn({5, 8});
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE((*created)->BeginStep().ok());
    ASSERT_TRUE((*created)->Backward(model->forward(x).pow(2).sum()).ok());
    reference->forward(x).pow(2).sum().backward();
    EXPECT_TRUE(torch::allclose(model->weight.grad(), reference->weight.grad()));
    EXPECT_TRUE(torch::allclose(model->bias.grad(), reference->bias.grad()));
    const auto buckets = (*created)->reducer().bucket_assignment();
    ASSERT_EQ(buckets.size(), 1u);
    EXPECT_TRUE(model->weight.grad().is_alias_of(model->bias.grad()));  // one flat bucket
    (*created)->ZeroGrad();
    EXPECT_FALSE(model->weight.grad().defined());
    reference->zero_grad();
  }
}

}  // namespace
}  // namespace ddp
