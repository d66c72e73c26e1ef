// Our SGD (multi-tensor kernels) against LibTorch's torch::optim::SGD (one parameter at a time,
// the arithmetic of torch.optim.SGD with dampening 0): bitwise equal weights and momentum
// buffers after several steps, for every option, with a parameter that sometimes has no
// gradient; and the learning-rate schedules.
#include "trainer/models/optimizer.h"

#include <torch/torch.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ddp {
namespace {

std::vector<at::Tensor> MakeParams() {
  torch::manual_seed(3);
  return {torch::randn({17, 5}), torch::randn({5}), torch::randn({3, 3, 2, 2}), torch::randn({1})};
}

struct Case {
  const char* name;
  double momentum, weight_decay;
  bool nesterov;
};

TEST(SgdTest, MatchesLibTorchSgdBitwise) {
  for (const Case& c :
       {Case{"plain", 0, 0, false}, Case{"momentum", 0.9, 0, false},
        Case{"momentum+wd", 0.9, 1e-4, false}, Case{"nesterov+wd", 0.9, 5e-4, true}}) {
    SCOPED_TRACE(c.name);
    std::vector<at::Tensor> ours = MakeParams(), ref = MakeParams();
    std::vector<models::NamedTensor> named;
    for (size_t i = 0; i < ours.size(); ++i) {
      ours[i].set_requires_grad(true);
      ref[i].set_requires_grad(true);
      named.push_back({"p" + std::to_string(i), ours[i]});
    }
    Sgd sgd(named, SgdOptions{c.momentum, c.weight_decay, c.nesterov});
    torch::optim::SGD torch_sgd(ref, torch::optim::SGDOptions(0.1)
                                         .momentum(c.momentum)
                                         .weight_decay(c.weight_decay)
                                         .nesterov(c.nesterov));
    for (int step = 0; step < 6; ++step) {
      const double lr = 0.1 / (step + 1);
      for (auto& group : torch_sgd.param_groups()) {
        static_cast<torch::optim::SGDOptions&>(group.options()).lr(lr);
      }
      for (size_t i = 0; i < ours.size(); ++i) {
        // Parameter 3 gets no gradient on odd steps: both optimizers skip it then.
        if (i == 3 && step % 2 == 1) {
          ours[i].mutable_grad().reset();
          ref[i].mutable_grad().reset();
          continue;
        }
        at::Tensor g = torch::randn(ours[i].sizes());
        ours[i].mutable_grad() = g.clone();
        ref[i].mutable_grad() = g.clone();
      }
      sgd.Step(lr);
      torch_sgd.step();
    }
    for (size_t i = 0; i < ours.size(); ++i) {
      EXPECT_TRUE(torch::equal(ours[i], ref[i])) << "parameter " << i;
    }
    if (c.momentum != 0) {
      EXPECT_EQ(sgd.MomentumBuffers().size(), ours.size());
    }
  }
}

// A resumed optimizer (momentum restored from a checkpoint) continues exactly like the original.
TEST(SgdTest, MomentumBuffersRoundTrip) {
  std::vector<at::Tensor> a = MakeParams(), b = MakeParams();
  std::vector<models::NamedTensor> na, nb;
  for (size_t i = 0; i < a.size(); ++i) {
    na.push_back({"p" + std::to_string(i), a[i]});
    nb.push_back({"p" + std::to_string(i), b[i]});
  }
  Sgd first(na, SgdOptions{0.9, 1e-4, false});
  for (auto& p : a) p.mutable_grad() = torch::ones_like(p);
  first.Step(0.1);
  for (size_t i = 0; i < a.size(); ++i) b[i].copy_(a[i]);
  Sgd second(nb, SgdOptions{0.9, 1e-4, false});
  EXPECT_EQ(second.LoadMomentumBuffers(first.MomentumBuffers()), "");
  for (size_t i = 0; i < a.size(); ++i) {
    a[i].mutable_grad() = torch::full_like(a[i], 0.5);
    b[i].mutable_grad() = torch::full_like(b[i], 0.5);
  }
  first.Step(0.1);
  second.Step(0.1);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << i;
  EXPECT_NE(second.LoadMomentumBuffers({{"nope", torch::ones({1})}}), "");
}

TEST(LearningRateTest, Schedules) {
  ScheduleOptions s;
  s.base_lr = 0.1;
  s.epochs = 90;
  s.steps_per_epoch = 10;
  s.step_epochs = 30;
  EXPECT_DOUBLE_EQ(LearningRate(s, 0, 0), 0.1);
  EXPECT_NEAR(LearningRate(s, 30, 300), 0.01, 1e-12);
  EXPECT_NEAR(LearningRate(s, 89, 899), 0.001, 1e-12);
  s.name = "constant";
  EXPECT_DOUBLE_EQ(LearningRate(s, 50, 500), 0.1);
  s.name = "cosine";
  EXPECT_NEAR(LearningRate(s, 0, 0), 0.1, 1e-12);
  EXPECT_NEAR(LearningRate(s, 45, 450), 0.05, 1e-9);
  EXPECT_LT(LearningRate(s, 89, 899), 0.001);
  s.name = "step";
  s.warmup_epochs = 5;
  EXPECT_LT(LearningRate(s, 0, 0), 0.1 / 5 + 1e-12);  // warming up
  EXPECT_DOUBLE_EQ(LearningRate(s, 5, 50), 0.1);
}

}  // namespace
}  // namespace ddp
