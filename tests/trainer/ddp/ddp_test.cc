// DDP equivalence, in real processes on loopback (Gloo, CPU):
//  * W ranks with per-rank batch B end with the parameters of one process with batch W*B on the
//    same samples: MLP, conv net with BatchNorm, TorchScript MLP; with and without no_sync
//    accumulation; one bucket per parameter, default buckets, everything in one bucket; bf16.
//  * Our C++ DDP and PyTorch's Python DDP (DistributedSampler, same seed) train a TorchScript
//    model to the same weights.
#include <torch/script.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/multiprocess.h"
#include "tests/trainer/ddp/ddp_test_util.h"

namespace ddp {
namespace {

using testing::ChildRank;
using testing::ChildWorldSize;
using testing::DdpRun;
using testing::TrainReference;

constexpr int kSteps = 4;
constexpr int64_t kPerRankBatch = 4;
constexpr double kLr = 0.1;

struct Config {
  std::string name;
  int64_t first_bucket_bytes;
  int64_t bucket_bytes;
  int micro_batches;
  double tol;
  bool bf16 = false;
};

std::vector<Config> Configs() {
  return {
      {"one bucket per parameter", 1 << 20, -1, 1, 1e-5},
      {"default buckets", 1 << 20, 25 << 20, 1, 1e-5},
      {"everything in one bucket", 0, 0, 1, 1e-5},
      {"tiny buckets + no_sync x2", 256, 512, 2, 1e-5},
      {"default buckets + no_sync x3", 1 << 20, 25 << 20, 3, 1e-5},
      {"bf16 allreduce", 1 << 20, 25 << 20, 1, 3e-2, true},
  };
}

DdpRun RunFor(const Config& c) {
  DdpRun run;
  run.options.reducer.first_bucket_bytes = c.first_bucket_bytes;
  run.options.reducer.bucket_bytes = c.bucket_bytes;
  if (c.bf16) run.options.reducer.comm_dtype = at::kBFloat16;
  run.micro_batches = c.micro_batches;
  return run;
}

// Every rank trains the model with DDP and checks it against the single-process reference it
// computes itself.
void EquivalenceBody() {
  torch::set_num_threads(1);
  auto pg = testing::MakeGloo(std::chrono::seconds(60));
  const int world = ChildWorldSize();
  const int rank = ChildRank();
  for (const Config& c : Configs()) {
    SCOPED_TRACE(c.name);
    const int64_t rows = world * kPerRankBatch * c.micro_batches;
    {  // MLP: reference is one process with the whole batch.
      auto data = testing::MakeData(kSteps, rows, {20});
      torch::manual_seed(100);
      auto ref = testing::MakeMlp();
      TrainReference([&](const at::Tensor& x) { return ref->forward(x); }, TensorsOf(*ref), data, 1,
                     kLr);
      torch::manual_seed(100 + rank);  // differs per rank: construction broadcasts rank 0's
      auto mlp = testing::MakeMlp();
      testing::TrainDdp([&](const at::Tensor& x) { return mlp->forward(x); }, TensorsOf(*mlp), data,
                        pg, RunFor(c), kLr);
      testing::ExpectSame(TensorsOf(*mlp).parameters, TensorsOf(*ref).parameters, c.tol,
                          "mlp " + c.name);
    }
    if (c.micro_batches == 1) {  // conv + BatchNorm: buffers broadcast from rank 0
      auto data = testing::MakeData(kSteps, rows, {3, 6, 6});
      torch::manual_seed(200);
      auto ref = testing::MakeConvBn();
      ref->train();
      TrainReference([&](const at::Tensor& x) { return ref->forward(x); }, TensorsOf(*ref), data,
                     world, kLr);
      torch::manual_seed(200 + rank);
      auto net = testing::MakeConvBn();
      net->train();
      testing::TrainDdp([&](const at::Tensor& x) { return net->forward(x); }, TensorsOf(*net), data,
                        pg, RunFor(c), kLr);
      testing::ExpectSame(TensorsOf(*net).parameters, TensorsOf(*ref).parameters, c.tol * 10,
                          "convbn " + c.name);
      // Every rank ends a step with rank 0's buffers (broadcast after backward): all replicas.
      testing::ExpectSame(TensorsOf(*net).buffers, TensorsOf(*ref).buffers, c.tol * 10,
                          "convbn buffers " + c.name);
    }
  }
  pg->barrier()->wait();
}

TEST(DdpEquivalence, World2MatchesSingleProcess) {
  if (testing::IsChild()) return EquivalenceBody();
  testing::ExpectAllRanksPassed(testing::RunRanks(2, absl::Seconds(150)), 2);
}

TEST(DdpEquivalence, World4MatchesSingleProcess) {
  if (testing::IsChild()) return EquivalenceBody();
  testing::ExpectAllRanksPassed(testing::RunRanks(4, absl::Seconds(150)), 4);
}

std::string Python() {
  const char* p = std::getenv("DDP_TORCH_PYTHON");
  return p && *p && ::access(p, X_OK) == 0 ? p : "";
}

std::string ScriptPath() {
  const char* src = std::getenv("DDP_SOURCE_DIR");
  return absl::StrCat(src ? src : ".", "/tests/trainer/ddp/ddp_reference.py");
}

// std::filesystem is avoided on purpose: libtorch.so exports a broken copy of some of it.
std::string TempDir(const std::string& name) {
  std::string templ = absl::StrCat("/tmp/ddp_test_", name, "_XXXXXX");
  if (::mkdtemp(templ.data()) == nullptr) std::abort();
  return templ;
}

void RemoveDir(const std::string& dir) {
  if (std::system(("rm -rf '" + dir + "'").c_str()) != 0)
    std::fprintf(stderr, "rm %s\n", dir.c_str());
}

ModuleTensors Cloned(const torch::jit::Module& m) {
  ModuleTensors t = TensorsOf(m);
  for (auto& p : t.parameters) p.tensor = p.tensor.detach().clone();
  return t;
}

TEST(DdpEquivalence, TorchScriptModelMatchesSingleProcess) {
  if (testing::IsChild()) {
    torch::set_num_threads(1);
    auto pg = testing::MakeGloo(std::chrono::seconds(60));
    const std::string path = std::getenv("DDP_TEST_MODEL");
    for (const Config& c : Configs()) {
      if (c.bf16) continue;
      SCOPED_TRACE(c.name);
      auto data =
          testing::MakeData(kSteps, ChildWorldSize() * kPerRankBatch * c.micro_batches, {20});
      auto ref = torch::jit::load(path);
      TrainReference([&](const at::Tensor& x) { return ref.forward({x}).toTensor(); },
                     TensorsOf(ref), data, 1, kLr);
      auto model = torch::jit::load(path);
      if (ChildRank() == 1) {  // rank 0's weights must win
        torch::NoGradGuard no_grad;
        for (auto& p : TensorsOf(model).parameters) p.tensor.add_(1.0);
      }
      testing::TrainDdp([&](const at::Tensor& x) { return model.forward({x}).toTensor(); },
                        TensorsOf(model), data, pg, RunFor(c), kLr);
      testing::ExpectSame(TensorsOf(model).parameters, TensorsOf(ref).parameters, c.tol,
                          "torchscript " + c.name);
    }
    return;
  }
  if (Python().empty()) GTEST_SKIP() << "DDP_TORCH_PYTHON is not set: cannot script a model";
  const std::string dir = TempDir("script");
  const std::string model = dir + "/mlp.pt";
  ASSERT_EQ(std::system((Python() + " " + ScriptPath() + " script-mlp " + model).c_str()), 0);
  testing::ExpectAllRanksPassed(
      testing::RunRanks(2, absl::Seconds(120), {{"DDP_TEST_MODEL", model}}), 2);
  RemoveDir(dir);
}

TEST(DdpEquivalence, MatchesPyTorchDistributedDataParallel) {
  if (testing::IsChild()) {
    torch::set_num_threads(1);
    const std::string dir = std::getenv("DDP_TEST_DIR");
    auto pg = testing::MakeGloo(std::chrono::seconds(60));
    const int rank = ChildRank();
    auto model = torch::jit::load(dir + "/model.pt");
    auto holder = torch::jit::load(dir + "/data.pt");
    const at::Tensor x = holder.attr("x").toTensor();
    const at::Tensor y = holder.attr("y").toTensor();
    const at::Tensor idx = holder.attr("idx").toTensor();  // [epochs, world, per_rank]
    auto created = DistributedDataParallel::Create(TensorsOf(model), pg);
    ASSERT_TRUE(created.ok()) << created.status();
    auto& ddp = **created;
    std::vector<at::Tensor> params;
    for (const auto& p : ddp.parameters()) params.push_back(p.tensor);
    torch::optim::SGD sgd(params, torch::optim::SGDOptions(0.1).momentum(0.9));
    constexpr int64_t kBatch = 8;
    for (int64_t epoch = 0; epoch < idx.size(0); ++epoch) {
      const at::Tensor mine = idx[epoch][rank];
      for (int64_t begin = 0; begin < mine.size(0); begin += kBatch) {
        const at::Tensor batch = mine.narrow(0, begin, std::min(kBatch, mine.size(0) - begin));
        ASSERT_TRUE(ddp.BeginStep().ok());
        auto loss = torch::cross_entropy_loss(model.forward({x.index({batch})}).toTensor(),
                                              y.index({batch}));
        auto status = ddp.Backward(loss);
        ASSERT_TRUE(status.ok()) << status;
        sgd.step();
        ddp.ZeroGrad();
      }
    }
    auto expected = torch::jit::load(dir + "/final.pt");
    testing::ExpectSame(TensorsOf(model).parameters, Cloned(expected).parameters, 1e-4,
                        "vs PyTorch DDP");
    return;
  }
  if (Python().empty()) GTEST_SKIP() << "DDP_TORCH_PYTHON is not set: no PyTorch to compare with";
  const std::string dir = TempDir("pytorch");
  ASSERT_EQ(std::system((Python() + " " + ScriptPath() + " pytorch-ddp " + dir).c_str()), 0);
  testing::ExpectAllRanksPassed(testing::RunRanks(2, absl::Seconds(120), {{"DDP_TEST_DIR", dir}}),
                                2);
  RemoveDir(dir);
}

}  // namespace
}  // namespace ddp
