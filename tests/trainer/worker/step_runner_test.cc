// StepRunner on one rank (Gloo, world 1): a step updates the weights, clears the gradients and
// commits the step; a step that throws in its forward pass leaves weights, momentum, gradients,
// BatchNorm buffers, random generators and the committed step as they were (StepRollback).
#include "trainer/worker/step_runner.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "gtest/gtest.h"
#include "tests/trainer/worker/worker_test_util.h"
#include "trainer/worker/step_rollback.h"

namespace ddp {
namespace {

TEST(StepRunner, CommitsAStepOnlyOnceItsOptimizerRan) {
  const testing::SmallRun c = testing::SmallConfig("mlp", 64);
  const DataStage data = testing::OpenData(c);
  ModelStage model = testing::BuildModel(c, data, 3);
  TrainingPosition at;
  CommunicationStage comm(c10::make_intrusive<c10d::HashStore>(), testing::GlooOptions(), model,
                          at);
  auto root = comm.Connect("one", 0, 1);
  ASSERT_TRUE(root.ok()) << root.status();
  auto loader = testing::LoaderAt(c, data, at, 0, 1);
  auto batch = loader->Next();
  ASSERT_TRUE(batch.ok() && batch->has_value());
  StepRunner runner(model, comm, at, {/*bf16=*/true});  // ignored on the CPU
  const at::Tensor before = model.model().parameters()[0].detach().clone();
  auto step = runner.Run(**batch, c.lr);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(at.step, 1);
  EXPECT_EQ(step->logits.scalar_type(), at::kFloat);
  EXPECT_EQ(step->logits.size(0), c.batch_size);
  EXPECT_FALSE(torch::equal(model.model().parameters()[0], before));
  for (const auto& p : model.model().parameters()) EXPECT_FALSE(p.grad().defined());

  // A batch whose labels are out of range: the loss throws inside the step.
  data::Batch bad = **batch;
  bad.labels = torch::full_like(bad.labels, 1000);
  ModelStage snapshot = testing::BuildModel(c, data, 3);
  ASSERT_TRUE(snapshot.Load(model.model().state_dict(), model.optimizer().MomentumBuffers()).ok());
  EXPECT_ANY_THROW(runner.Run(bad, c.lr));
  EXPECT_EQ(at.step, 1) << "a failed step must not be committed";
  for (const auto& p : model.model().parameters()) EXPECT_FALSE(p.grad().defined());
  testing::ExpectBitwiseEqual(model, snapshot, "after the failed step");
  // The next good step runs normally.
  ASSERT_TRUE(runner.Run(**batch, c.lr).ok());
  EXPECT_EQ(at.step, 2);
}

// A step that fails after its forward ran (the loss throws) leaves the BatchNorm buffers (the
// running statistics and the batch counter that the forward moved) as the last committed step
// left them, and the random generators too.
TEST(StepRunner, AFailedStepPutsBackTheBuffersAndGeneratorsItsForwardChanged) {
  const testing::SmallRun c = testing::SmallConfig("cnn", 64);
  const DataStage data = testing::OpenData(c);
  ModelStage model = testing::BuildModel(c, data, 3);
  ASSERT_FALSE(model.tensors().buffers.empty()) << "the CNN has BatchNorm buffers";
  TrainingPosition at;
  CommunicationStage comm(c10::make_intrusive<c10d::HashStore>(), testing::GlooOptions(), model,
                          at);
  ASSERT_TRUE(comm.Connect("one", 0, 1).ok());
  auto loader = testing::LoaderAt(c, data, at, 0, 1);
  auto batch = loader->Next();
  ASSERT_TRUE(batch.ok() && batch->has_value());
  StepRunner runner(model, comm, at, {});
  ASSERT_TRUE(runner.Run(**batch, c.lr).ok());
  ModelStage snapshot = testing::BuildModel(c, data, 3);
  ASSERT_TRUE(snapshot.Load(model.model().state_dict(), model.optimizer().MomentumBuffers()).ok());
  const at::Tensor next_draw = [] {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    const at::Tensor state = gen.get_state();
    at::Tensor draw = at::rand({4});
    gen.set_state(state);
    return draw;
  }();

  data::Batch bad = **batch;
  bad.labels = torch::full_like(bad.labels, 1000);
  // The forward moves the buffers before the loss throws; the generator must be left as it was
  // (StepRollback's own test below shows that a draw is put back).
  EXPECT_ANY_THROW(runner.Run(bad, c.lr));
  EXPECT_EQ(at.step, 1);
  testing::ExpectBitwiseEqual(model, snapshot, "after the failed step");
  EXPECT_TRUE(torch::equal(at::rand({4}), next_draw)) << "the generator was not put back";
}

TEST(StepRollback, RestoresBuffersAndGeneratorsAndNothingBeforeASave) {
  const testing::SmallRun c = testing::SmallConfig("cnn", 64);
  const DataStage data = testing::OpenData(c);
  ModelStage model = testing::BuildModel(c, data, 3);
  StepRollback rollback(model);
  const at::Tensor buffer = model.tensors().buffers.front().tensor;
  {
    c10::NoGradGuard no_grad;
    buffer.add_(1);
  }
  rollback.Restore();  // nothing saved yet: nothing changes
  const at::Tensor moved = buffer.clone();
  rollback.Save();
  const at::Tensor first = at::rand({3});
  {
    c10::NoGradGuard no_grad;
    buffer.mul_(3);
  }
  rollback.Restore();
  EXPECT_TRUE(torch::equal(buffer, moved));
  EXPECT_TRUE(torch::equal(at::rand({3}), first)) << "the draw after the save comes again";
}

}  // namespace
}  // namespace ddp
