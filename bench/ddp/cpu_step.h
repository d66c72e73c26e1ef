// Shared by the benchmarks that weigh a per-step cost against one training step of a model
// (step_rollback_bench.cc, section_timing_bench.cc): a model with its optimizer and one batch of
// synthetic 3 x image x image images on the CPU, one step (forward, backward, SGD), and the
// median of timings.
#ifndef SLURM_DDP_BENCH_DDP_CPU_STEP_H_
#define SLURM_DDP_BENCH_DDP_CPU_STEP_H_

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/worker/data_stage.h"
#include "trainer/worker/model_stage.h"

namespace ddp::bench {

using Clock = std::chrono::steady_clock;

inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

inline double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct CpuStep {
  ddp::DataStage data;
  ddp::ModelStage model;
  data::Batch batch;

  // Forward, backward, SGD, gradients dropped.
  void Run() {
    at::Tensor loss = at::cross_entropy_loss(model.model().forward(batch.images), batch.labels);
    loss.backward();
    model.optimizer().Step(0.01);
    for (auto& p : model.model().parameters()) p.mutable_grad() = at::Tensor();
  }
};

// `arch` (--arch's names) on `batch` images of 3 x image x image, 10 classes, one intra-op thread.
inline absl::StatusOr<CpuStep> MakeCpuStep(const std::string& arch, int image, int batch) {
  at::set_num_threads(1);
  ddp::DataStage::Options data_options;
  data_options.data = "synthetic:" + std::to_string(batch) + "x3x" + std::to_string(image) + "x" +
                      std::to_string(image) + ":10";
  absl::StatusOr<ddp::DataStage> data = ddp::DataStage::Open(data_options);
  if (!data.ok()) return data.status();
  torch::manual_seed(1);
  ddp::ModelStage::Options model_options;
  model_options.arch = arch;
  absl::StatusOr<ddp::ModelStage> model =
      ddp::ModelStage::Create(model_options, data->train(), at::kCPU);
  if (!model.ok()) return model.status();
  std::vector<int64_t> indices(static_cast<size_t>(batch));
  for (int i = 0; i < batch; ++i) indices[static_cast<size_t>(i)] = i;
  absl::StatusOr<data::Batch> b = data->train().GetBatch(indices, 0);
  if (!b.ok()) return b.status();
  model->model().train(true);
  return CpuStep{std::move(*data), std::move(*model), std::move(*b)};
}

}  // namespace ddp::bench

#endif  // SLURM_DDP_BENCH_DDP_CPU_STEP_H_
