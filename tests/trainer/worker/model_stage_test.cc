// ModelStage: built as the worker builds it (seeded, sized for the data, on its device, SGD over
// its parameters), and loaded from a saved state with every missing or mis-shaped entry refused.
#include "trainer/worker/model_stage.h"

#include <torch/torch.h>

#include <string>

#include "gtest/gtest.h"
#include "tests/trainer/worker/worker_test_util.h"

namespace ddp {
namespace {

// One SGD step with a fixed gradient, so that momentum buffers exist.
void StepOnce(ModelStage& m) {
  for (auto& p : m.model().parameters()) p.mutable_grad() = torch::ones_like(p);
  m.optimizer().Step(0.1);
  for (auto& p : m.model().parameters()) p.mutable_grad().reset();
}

TEST(ModelStage, BuildsTheConfiguredArchitectureWithItsOptimizer) {
  const testing::SmallRun c = testing::SmallConfig("cnn");
  const DataStage data = testing::OpenData(c);
  ModelStage m = testing::BuildModel(c, data, 1);
  EXPECT_NE(m.model().description().find("cnn"), std::string::npos) << m.model().description();
  EXPECT_EQ(m.device(), at::Device(at::kCPU));
  const ModuleTensors t = m.tensors();
  EXPECT_EQ(t.parameters.size(), m.model().named_parameters().size());
  EXPECT_FALSE(t.buffers.empty());  // BatchNorm statistics
  EXPECT_EQ(m.optimizer().parameters().size(), t.parameters.size());
  EXPECT_DOUBLE_EQ(m.optimizer().options().momentum, c.model.sgd.momentum);
  // The same seed builds the same weights.
  ModelStage again = testing::BuildModel(c, data, 1);
  testing::ExpectBitwiseEqual(again, m, "same seed");
  // A bad architecture names itself.
  ModelStage::Options bad = c.model;
  bad.arch = "vgg99";
  auto refused = ModelStage::Create(bad, data.train(), at::kCPU);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("vgg99"), std::string::npos) << refused.status();
  // --fused-bn-relu on a worker whose device turned out to be the CPU (--device auto, no GPU):
  // refused with the reason, not run through the CPU implementation.
  ModelStage::Options fused = c.model;
  fused.arch = "resnet18";
  fused.channels_last = true;
  fused.fused_bn_relu = true;
  auto on_cpu = ModelStage::Create(fused, data.train(), at::kCPU);
  ASSERT_FALSE(on_cpu.ok());
  EXPECT_EQ(on_cpu.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(on_cpu.status().message().find("--fused-bn-relu runs on CUDA tensors"),
            std::string::npos)
      << on_cpu.status();
}

TEST(ModelStage, LoadsWeightsAndMomentum) {
  const testing::SmallRun c = testing::SmallConfig("mlp");
  const DataStage data = testing::OpenData(c);
  ModelStage saved = testing::BuildModel(c, data, 1);
  StepOnce(saved);
  ModelStage loaded = testing::BuildModel(c, data, 2);
  ASSERT_TRUE(loaded.Load(saved.model().state_dict(), saved.optimizer().MomentumBuffers()).ok());
  testing::ExpectBitwiseEqual(loaded, saved, "loaded");
}

TEST(ModelStage, WithoutMomentumTheSavedBuffersAreNotLoaded) {
  testing::SmallRun c = testing::SmallConfig("mlp");
  const DataStage data = testing::OpenData(c);
  ModelStage saved = testing::BuildModel(c, data, 1);
  StepOnce(saved);
  c.model.sgd.momentum = 0;
  ModelStage plain = testing::BuildModel(c, data, 2);
  ASSERT_TRUE(plain.Load(saved.model().state_dict(), saved.optimizer().MomentumBuffers()).ok());
  EXPECT_TRUE(plain.optimizer().MomentumBuffers().empty());
}

TEST(ModelStage, RefusesAMissingOrMisshapedEntry) {
  const testing::SmallRun c = testing::SmallConfig("mlp");
  const DataStage data = testing::OpenData(c);
  ModelStage m = testing::BuildModel(c, data, 1);
  auto state = m.model().state_dict();
  auto missing = state;
  missing.pop_back();
  absl::Status st = m.Load(missing, {});
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("lacks model entry " + state.back().name), std::string::npos) << st;
  auto misshaped = state;
  misshaped[0].tensor = torch::zeros({3});
  st = m.Load(misshaped, {});
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(st.message().find(state[0].name + " has shape [3]"), std::string::npos) << st;
  st = m.Load(state, {{"no.such.parameter", torch::zeros({1})}});
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("no.such.parameter"), std::string::npos) << st;
}

}  // namespace
}  // namespace ddp
