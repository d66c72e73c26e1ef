// Shared pieces of the DDP tests: a Gloo process group for a child rank, small models, a
// deterministic data set, DDP training and the single-process reference it must match.
#ifndef SLURM_DDP_TESTS_TRAINER_DDP_DDP_TEST_UTIL_H_
#define SLURM_DDP_TESTS_TRAINER_DDP_DDP_TEST_UTIL_H_

#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/child_store.h"
#include "tests/testing/multiprocess.h"
#include "trainer/ddp/ddp.h"
#include "trainer/ddp/process_group.h"

namespace ddp::testing {

inline c10::intrusive_ptr<c10d::Backend> MakeGloo(std::chrono::milliseconds timeout) {
  auto store = ChildFileStore();
  ProcessGroupOptions options;
  options.backend = BackendKind::kGloo;
  options.timeout = timeout;
  options.gloo_hostname = "127.0.0.1";
  options.gloo_threads = 1;
  auto pg = CreateProcessGroup(store, ChildRank(), ChildWorldSize(), options);
  if (!pg.ok()) {
    std::fprintf(stderr, "%s\n", std::string(pg.status().message()).c_str());
    std::exit(3);
  }
  return *pg;
}

inline void ExpectAllRanksPassed(const std::vector<RankResult>& results, size_t world) {
  ASSERT_EQ(results.size(), world);
  for (const auto& r : results) {
    EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " timed out:\n" << r.output;
    EXPECT_EQ(r.exit_code, 0) << "rank " << r.rank << ":\n" << r.output;
  }
}

inline torch::nn::Sequential MakeMlp(int64_t in = 20, int64_t hidden = 32, int64_t out = 4) {
  return torch::nn::Sequential(torch::nn::Linear(in, hidden), torch::nn::ReLU(),
                               torch::nn::Linear(hidden, hidden / 2), torch::nn::ReLU(),
                               torch::nn::Linear(hidden / 2, out));
}

inline torch::nn::Sequential MakeConvBn() {
  namespace nn = torch::nn;
  return nn::Sequential(
      nn::Conv2d(nn::Conv2dOptions(3, 8, 3).padding(1)), nn::BatchNorm2d(8), nn::ReLU(),
      nn::Conv2d(nn::Conv2dOptions(8, 8, 3).padding(1)), nn::BatchNorm2d(8), nn::ReLU(),
      nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(1)), nn::Flatten(), nn::Linear(8, 4));
}

// Input rows for `steps` steps of `rows` samples each, identical in every process.
struct Data {
  std::vector<at::Tensor> x, y;
};
inline Data MakeData(int steps, int64_t rows, std::vector<int64_t> sample_shape) {
  torch::manual_seed(1234);
  Data d;
  std::vector<int64_t> shape = {rows};
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  for (int s = 0; s < steps; ++s) {
    d.x.push_back(torch::randn(shape));
    d.y.push_back(torch::randint(0, 4, {rows}));
  }
  return d;
}

using Forward = std::function<at::Tensor(const at::Tensor&)>;

// Single process, global batch per step. `chunks` > 1 emulates what DDP computes for models
// with batch statistics: each chunk is forwarded separately from the step's starting buffers
// (as every rank does after the buffer broadcast), and the buffers of chunk 0 (rank 0's) win.
inline void TrainReference(const Forward& forward, const ModuleTensors& tensors, const Data& data,
                           int chunks, double lr) {
  std::vector<at::Tensor> params;
  for (const auto& p : tensors.parameters) params.push_back(p.tensor);
  torch::optim::SGD sgd(params, torch::optim::SGDOptions(lr).momentum(0.9));
  for (size_t s = 0; s < data.x.size(); ++s) {
    sgd.zero_grad();
    std::vector<at::Tensor> saved;
    for (const auto& b : tensors.buffers) saved.push_back(b.tensor.clone());
    const int64_t rows = data.x[s].size(0) / chunks;
    for (int k = chunks - 1; k >= 0; --k) {
      {
        torch::NoGradGuard no_grad;
        for (size_t i = 0; i < saved.size(); ++i) tensors.buffers[i].tensor.copy_(saved[i]);
      }
      auto out = forward(data.x[s].narrow(0, k * rows, rows));
      auto loss = torch::cross_entropy_loss(out, data.y[s].narrow(0, k * rows, rows)) / chunks;
      loss.backward();
    }
    sgd.step();
  }
}

struct DdpRun {
  DdpOptions options;
  int micro_batches = 1;  // > 1: all but the last run under NoSync
};

// This rank's share of every step: micro-batch m of rank r is rows [(m * W + r) * B, +B).
inline void TrainDdp(const Forward& forward, ModuleTensors tensors, const Data& data,
                     c10::intrusive_ptr<c10d::Backend> pg, const DdpRun& run, double lr,
                     std::vector<StepTimings>* timings = nullptr) {
  const int world = pg->getSize();
  const int rank = pg->getRank();
  auto created = DistributedDataParallel::Create(tensors, pg, run.options);
  ASSERT_TRUE(created.ok()) << created.status();
  auto& ddp = **created;
  std::vector<at::Tensor> params;
  for (const auto& p : tensors.parameters) params.push_back(p.tensor);
  torch::optim::SGD sgd(params, torch::optim::SGDOptions(lr).momentum(0.9));
  for (size_t s = 0; s < data.x.size(); ++s) {
    const int64_t b = data.x[s].size(0) / (world * run.micro_batches);
    for (int m = 0; m < run.micro_batches; ++m) {
      const int64_t begin = (m * world + rank) * b;
      ASSERT_TRUE(ddp.BeginStep().ok());
      auto out = forward(data.x[s].narrow(0, begin, b));
      auto loss = torch::cross_entropy_loss(out, data.y[s].narrow(0, begin, b)) /
                  static_cast<double>(run.micro_batches);
      if (m + 1 < run.micro_batches) {
        auto guard = ddp.NoSync();
        ASSERT_TRUE(ddp.Backward(loss).ok());
      } else {
        auto status = ddp.Backward(loss);
        ASSERT_TRUE(status.ok()) << status;
      }
    }
    ddp.BeginOptimizer();
    sgd.step();
    ddp.ZeroGrad();
    ddp.EndOptimizer();
    if (timings) timings->push_back(ddp.timings());
  }
}

inline void ExpectSame(const std::vector<NamedTensor>& got, const std::vector<NamedTensor>& want,
                       double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    auto g = got[i].tensor.detach().to(torch::kDouble);
    auto w = want[i].tensor.detach().to(torch::kDouble);
    const double diff = (g - w).abs().max().item<double>();
    EXPECT_LE(diff, tol) << what << ": '" << got[i].name << "' differs by " << diff;
  }
}

}  // namespace ddp::testing

#endif  // SLURM_DDP_TESTS_TRAINER_DDP_DDP_TEST_UTIL_H_
