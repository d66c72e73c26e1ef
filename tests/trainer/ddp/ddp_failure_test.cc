// DDP behaviour beyond the arithmetic, in real processes on loopback (Gloo, CPU): allreduce
// overlaps backward (one call per bucket, the first before backward ends), buckets are rebuilt
// from the observed gradient order, and bad input fails clearly instead of hanging.
#include <torch/torch.h>

#include <chrono>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "tests/testing/multiprocess.h"
#include "tests/trainer/ddp/ddp_test_util.h"

namespace ddp {
namespace {

using testing::ChildRank;

// Registers `early` before `late` but uses `late` first, so the gradient-ready order (early's
// gradients first) differs from reverse registration order.
struct Swapped : torch::nn::Module {
  Swapped() {
    early = register_module("early", torch::nn::Linear(64, 10));
    late = register_module("late", torch::nn::Linear(32, 64));
    head = register_module("head", torch::nn::Linear(32, 32));
  }
  at::Tensor forward(const at::Tensor& x) {
    return early->forward(torch::relu(late->forward(torch::relu(head->forward(x)))));
  }
  torch::nn::Linear early{nullptr}, late{nullptr}, head{nullptr};
};

TEST(DdpOverlap, OneAllreducePerBucketStartedBeforeBackwardEndsAndBucketsRebuilt) {
  if (!testing::IsChild()) {
    testing::ExpectAllRanksPassed(testing::RunRanks(2, absl::Seconds(90)), 2);
    return;
  }
  torch::set_num_threads(1);
  auto pg = testing::MakeGloo(std::chrono::seconds(60));
  torch::manual_seed(1);
  auto model = std::make_shared<Swapped>();
  DdpOptions options;
  options.reducer.bucket_bytes = -1;  // one bucket per parameter
  auto created = DistributedDataParallel::Create(TensorsOf(*model), pg, options);
  ASSERT_TRUE(created.ok()) << created.status();
  auto& ddp = **created;
  const auto names = ddp.parameters();  // early.w, early.b, late.w, late.b, head.w, head.b
  // Before the first step: reverse registration order.
  EXPECT_EQ(ddp.reducer().bucket_assignment().front(), std::vector<size_t>{5});
  auto data = testing::MakeData(3, 16, {32});
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(ddp.BeginStep().ok());
    auto loss = torch::cross_entropy_loss(model->forward(data.x[step]), data.y[step]);
    ASSERT_TRUE(ddp.Backward(loss).ok());
    const StepTimings t = ddp.timings();
    EXPECT_TRUE(t.synchronized);
    EXPECT_EQ(t.buckets, 6);
    EXPECT_EQ(t.allreduce_calls, t.buckets) << "one allreduce per bucket";
    ASSERT_EQ(t.bucket_launch_ms.size(), 6u);
    // The first bucket went out while backward was still producing gradients.
    EXPECT_LT(t.bucket_launch_ms.front(), t.last_grad_ready_ms) << "step " << step;
    EXPECT_GE(t.overlap_share, 0.0);
    EXPECT_LE(t.overlap_share, 1.0);
    EXPECT_GT(t.backward_ms, 0.0);
    EXPECT_GE(t.comm_wait_ms, 0.0);
    std::printf(
        "rank %d step %d: fwd %.3f bwd %.3f wait %.3f span %.3f overlap %.2f first "
        "launch %.3f last grad %.3f\n",
        ChildRank(), step, t.forward_ms, t.backward_ms, t.comm_wait_ms, t.allreduce_span_ms,
        t.overlap_share, t.bucket_launch_ms.front(), t.last_grad_ready_ms);
    if (step == 0) {
      // Rebuilt from the observed order: early's gradients come first now.
      const auto buckets = ddp.reducer().bucket_assignment();
      ASSERT_EQ(buckets.size(), 6u);
      EXPECT_TRUE(buckets[0][0] == 0 || buckets[0][0] == 1)
          << "first bucket holds " << names[buckets[0][0]].name;
      EXPECT_TRUE(buckets[5][0] == 4 || buckets[5][0] == 5)
          << "last bucket holds " << names[buckets[5][0]].name;
    }
    ddp.ZeroGrad();
  }
  // Gradients of a no_sync backward stay local: no allreduce issued.
  {
    auto guard = ddp.NoSync();
    ASSERT_TRUE(ddp.BeginStep().ok());
    ASSERT_TRUE(ddp.Backward(torch::cross_entropy_loss(model->forward(data.x[0]), data.y[0])).ok());
    EXPECT_FALSE(ddp.timings().synchronized);
    EXPECT_EQ(ddp.timings().allreduce_calls, 0);
  }
}

TEST(DdpFailures, MismatchedParameterShapesNameTheParameterAndRanks) {
  if (!testing::IsChild()) {
    testing::ExpectAllRanksPassed(testing::RunRanks(2, absl::Seconds(60)), 2);
    return;
  }
  auto pg = testing::MakeGloo(std::chrono::seconds(30));
  auto model = testing::MakeMlp(20, ChildRank() == 1 ? 34 : 32);
  auto created = DistributedDataParallel::Create(TensorsOf(*model), pg);
  ASSERT_FALSE(created.ok());
  const std::string message(created.status().message());
  std::printf("rank %d: %s\n", ChildRank(), message.c_str());
  EXPECT_NE(message.find("parameter '0.weight'"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 0 has [32, 20] Float"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 1 has [34, 20] Float"), std::string::npos) << message;
}

TEST(DdpFailures, RankRunningAnExtraStepTimesOutInsteadOfHanging) {
  if (!testing::IsChild()) {
    testing::ExpectAllRanksPassed(testing::RunRanks(2, absl::Seconds(60)), 2);
    return;
  }
  auto pg = testing::MakeGloo(std::chrono::seconds(3));
  torch::manual_seed(1);
  auto model = testing::MakeMlp();
  auto created = DistributedDataParallel::Create(TensorsOf(*model), pg);
  ASSERT_TRUE(created.ok()) << created.status();
  auto& ddp = **created;
  auto data = testing::MakeData(3, 8, {20});
  const int steps = ChildRank() == 1 ? 3 : 2;
  absl::Status last;
  const auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < steps; ++step) {
    ASSERT_TRUE(ddp.BeginStep().ok());
    last = ddp.Backward(torch::cross_entropy_loss(model->forward(data.x[step]), data.y[step]));
    if (step < 2) {
      ASSERT_TRUE(last.ok()) << last;
    }
    ddp.ZeroGrad();
  }
  if (ChildRank() == 0) {
    // Stay connected, so the peer's failure is the process-group timeout, not a closed socket.
    std::this_thread::sleep_for(std::chrono::seconds(6));
    return;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("rank 1 after %.1f s: %s\n", seconds, last.ToString().c_str());
  EXPECT_EQ(last.code(), absl::StatusCode::kDeadlineExceeded) << last;
  EXPECT_LT(seconds, 20);
}

struct WithUnused : torch::nn::Module {
  WithUnused() {
    used = register_module("used", torch::nn::Linear(20, 4));
    unused = register_module("unused", torch::nn::Linear(20, 4));
  }
  torch::nn::Linear used{nullptr}, unused{nullptr};
};

TEST(DdpFailures, UnusedParameterIsAnErrorUnlessFindUnusedParameters) {
  if (!testing::IsChild()) {
    testing::ExpectAllRanksPassed(testing::RunRanks(2, absl::Seconds(60)), 2);
    return;
  }
  auto pg = testing::MakeGloo(std::chrono::seconds(30));
  torch::manual_seed(ChildRank());
  auto model = std::make_shared<WithUnused>();
  auto data = testing::MakeData(2, 8, {20});
  {
    auto created = DistributedDataParallel::Create(TensorsOf(*model), pg);
    ASSERT_TRUE(created.ok()) << created.status();
    ASSERT_TRUE((*created)->BeginStep().ok());
    auto status =
        (*created)->Backward(torch::cross_entropy_loss(model->used->forward(data.x[0]), data.y[0]));
    ASSERT_FALSE(status.ok());
    std::printf("rank %d: %s\n", ChildRank(), status.ToString().c_str());
    EXPECT_NE(status.message().find("'unused.weight'"), std::string::npos) << status;
    EXPECT_NE(status.message().find("'unused.bias'"), std::string::npos) << status;
    EXPECT_NE(status.message().find("find_unused_parameters"), std::string::npos) << status;
    EXPECT_EQ(status.message().find("'used.weight'"), std::string::npos) << status;
  }
  model->zero_grad();
  DdpOptions options;
  options.reducer.find_unused_parameters = true;
  auto created = DistributedDataParallel::Create(TensorsOf(*model), pg, options);
  ASSERT_TRUE(created.ok()) << created.status();
  auto& ddp = **created;
  // Rank 1 uses `unused` too in the second step: its gradient is then (rank 1's) / 2.
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(ddp.BeginStep().ok());
    at::Tensor out = model->used->forward(data.x[step]);
    if (step == 1 && ChildRank() == 1) out = out + model->unused->forward(data.x[step]);
    auto status = ddp.Backward(torch::cross_entropy_loss(out, data.y[step]));
    ASSERT_TRUE(status.ok()) << status;
    const at::Tensor g = model->unused->weight.grad();
    ASSERT_TRUE(g.defined());
    if (step == 0) {
      EXPECT_EQ(g.abs().max().item<float>(), 0.0f);
    } else {
      EXPECT_GT(g.abs().max().item<float>(), 0.0f);
    }
    // Every rank holds the same averaged gradients.
    std::vector<at::Tensor> both = {model->used->weight.grad().clone()};
    pg->allreduce(both)->wait();
    EXPECT_TRUE(torch::allclose(both[0], model->used->weight.grad() * 2));
    ddp.ZeroGrad();
  }
}

}  // namespace
}  // namespace ddp
