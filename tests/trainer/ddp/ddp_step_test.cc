// DdpStep: begin -> backward -> optimizer, in that order only; a call out of order changes
// nothing; a step abandoned before its optimizer leaves no gradients behind and the weights as
// they were. One rank (Gloo, world 1) is enough: the guard's contract is local.
#include "trainer/ddp/ddp_step.h"

#include <torch/torch.h>

#include <cstdlib>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "gtest/gtest.h"
#include "trainer/ddp/process_group.h"

namespace ddp {
namespace {

struct Fixture {
  Fixture() {
    torch::manual_seed(0);
    ProcessGroupOptions options;
    options.backend = BackendKind::kGloo;
    options.gloo_hostname = "127.0.0.1";
    options.timeout = std::chrono::seconds(30);
    auto made = CreateProcessGroup(c10::make_intrusive<c10d::HashStore>(), 0, 1, options);
    if (!made.ok()) std::abort();
    pg = *made;
    model = torch::nn::Linear(4, 2);
    ModuleTensors tensors = TensorsOf(*model);
    auto built = DistributedDataParallel::Create(tensors, pg);
    if (!built.ok()) std::abort();
    ddp = *std::move(built);
  }
  at::Tensor Loss() {
    return torch::cross_entropy_loss(model->forward(torch::ones({3, 4})),
                                     torch::zeros({3}, torch::kLong));
  }
  bool GradsCleared() const {
    return !model->weight.grad().defined() && !model->bias.grad().defined();
  }

  c10::intrusive_ptr<c10d::Backend> pg;
  torch::nn::Linear model{nullptr};
  std::unique_ptr<DistributedDataParallel> ddp;
};

TEST(DdpStep, RunsInOrderAndClearsGradientsAfterTheOptimizer) {
  Fixture f;
  int optimizer_calls = 0;
  auto step = DdpStep::Begin(*f.ddp);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->phase(), DdpStep::Phase::kForward);
  // The optimizer before backward: refused, not run.
  EXPECT_EQ(step->ApplyOptimizer([&] { ++optimizer_calls; }).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(optimizer_calls, 0);
  ASSERT_TRUE(step->Backward(f.Loss()).ok());
  EXPECT_EQ(step->phase(), DdpStep::Phase::kReduced);
  EXPECT_TRUE(f.model->weight.grad().defined());
  EXPECT_EQ(step->Backward(f.Loss()).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(step->ApplyOptimizer([&] { ++optimizer_calls; }).ok());
  EXPECT_EQ(optimizer_calls, 1);
  EXPECT_EQ(step->phase(), DdpStep::Phase::kDone);
  EXPECT_TRUE(f.GradsCleared());
  EXPECT_EQ(step->ApplyOptimizer([&] { ++optimizer_calls; }).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(optimizer_calls, 1);
}

TEST(DdpStep, AnAbandonedStepLeavesNoGradientsAndTheWeightsAsTheyWere) {
  Fixture f;
  const at::Tensor before = f.model->weight.detach().clone();
  {
    auto step = DdpStep::Begin(*f.ddp);
    ASSERT_TRUE(step.ok());
    ASSERT_TRUE(step->Backward(f.Loss()).ok());
    EXPECT_TRUE(f.model->weight.grad().defined());
  }  // no optimizer: an error came, say
  EXPECT_TRUE(f.GradsCleared());
  EXPECT_TRUE(torch::equal(f.model->weight, before));
  // The next step is a clean one.
  auto next = DdpStep::Begin(*f.ddp);
  ASSERT_TRUE(next.ok());
  ASSERT_TRUE(next->Backward(f.Loss()).ok());
  EXPECT_TRUE(next->ApplyOptimizer([] {}).ok());
}

TEST(DdpStep, AFailedBackwardEndsTheStep) {
  Fixture f;
  // A loss that leaves the bias without a gradient: DDP refuses (find_unused_parameters off).
  auto step = DdpStep::Begin(*f.ddp);
  ASSERT_TRUE(step.ok());
  at::Tensor weight_only = (f.model->weight * 2).sum();
  const absl::Status st = step->Backward(weight_only);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'bias'"), std::string::npos) << st;
  EXPECT_EQ(step->phase(), DdpStep::Phase::kFailed);
  int calls = 0;
  EXPECT_EQ(step->ApplyOptimizer([&] { ++calls; }).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(calls, 0);
}

TEST(DdpStep, AMovedStepEndsOnce) {
  Fixture f;
  auto step = DdpStep::Begin(*f.ddp);
  ASSERT_TRUE(step.ok());
  DdpStep moved(std::move(*step));
  ASSERT_TRUE(moved.Backward(f.Loss()).ok());
  ASSERT_TRUE(moved.ApplyOptimizer([] {}).ok());
  EXPECT_TRUE(f.GradsCleared());
}

}  // namespace
}  // namespace ddp
