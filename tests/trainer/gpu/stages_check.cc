// GPU check of the worker's stages on one CUDA device with NCCL (world 1): the autocast guard
// on CUDA, a communication stage built, trained through, aborted (MarkFailed: the NCCL
// communicator is aborted) and rebuilt under a new prefix in the same process, the state kept
// bitwise, then shut down. Prints one line per check and the timings; exits 0 when all pass,
// 77 (skipped) without a CUDA device, 1 otherwise (ctest label gpu).
#include <ATen/autocast_mode.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "trainer/ddp/process_group.h"
#include "trainer/models/model_factory.h"
#include "trainer/worker/autocast_guard.h"
#include "trainer/worker/communication_stage.h"
#include "trainer/worker/model_stage.h"
#include "trainer/worker/step_runner.h"

namespace ddp {
namespace {

int failures = 0;

void Check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
  std::fflush(stdout);
  if (!ok) ++failures;
}

double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

at::ScalarType MatmulType(const at::Device& gpu) {
  const at::Tensor a = torch::ones({64, 64}, torch::TensorOptions().device(gpu));
  return torch::mm(a, a).scalar_type();
}

ModelStage Model(const at::Device& gpu) {
  torch::manual_seed(7);
  auto model = models::CreateModel("mlp", 10, {1, 16, 16});
  if (!model.ok()) throw std::runtime_error(std::string(model.status().message()));
  return ModelStage(*std::move(model), gpu, {0.9, 1e-4, false});
}

CommunicationStage::Options Nccl() {
  CommunicationStage::Options o;
  o.process_group.backend = BackendKind::kNccl;
  o.process_group.cuda_device = 0;
  o.process_group.timeout = std::chrono::seconds(60);
  return o;
}

data::Batch MakeBatch(int64_t i) {
  torch::manual_seed(100 + i);
  return {torch::randn({32, 1, 16, 16}), torch::randint(0, 10, {32})};
}

bool Steps(StepRunner& runner, int64_t first, int64_t count, at::ScalarType* logits_type) {
  for (int64_t i = first; i < first + count; ++i) {
    auto step = runner.Run(MakeBatch(i), 0.05);
    if (!step.ok()) {
      std::printf("step %ld failed: %s\n", static_cast<long>(i), step.status().ToString().c_str());
      return false;
    }
    *logits_type = step->logits.scalar_type();
  }
  torch::cuda::synchronize();
  return true;
}

bool SameState(const ModelStage& a, const ModelStage& b) {
  const auto x = a.model().state_dict();
  const auto y = b.model().state_dict();
  const auto mx = a.optimizer().MomentumBuffers();
  const auto my = b.optimizer().MomentumBuffers();
  if (x.size() != y.size() || mx.size() != my.size() || mx.empty()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!torch::equal(x[i].tensor, y[i].tensor)) return false;
  }
  for (size_t i = 0; i < mx.size(); ++i) {
    if (!torch::equal(mx[i].tensor, my[i].tensor)) return false;
  }
  return true;
}

int Main() {
  if (!torch::cuda::is_available() || !NcclCompiledIn()) {
    std::printf("SKIPPED: %s\n",
                NcclCompiledIn() ? "no CUDA device visible" : "no NCCL in this build");
    return 77;
  }
  const at::Device gpu(at::kCUDA, 0);

  // The autocast guard on CUDA, including an exception leaving its scope.
  {
    const at::ScalarType outside = MatmulType(gpu);
    at::ScalarType inside = at::kFloat;
    {
      AutocastGuard autocast(at::kCUDA, at::kBFloat16, true);
      inside = MatmulType(gpu);
    }
    Check(outside == at::kFloat && inside == at::kBFloat16 && MatmulType(gpu) == at::kFloat,
          "AutocastGuard: bf16 matmul inside, float outside");
    try {
      AutocastGuard autocast(at::kCUDA, at::kBFloat16, true);
      throw std::runtime_error("forward failed");
    } catch (const std::runtime_error&) {
    }
    Check(!at::autocast::is_autocast_enabled(at::kCUDA), "AutocastGuard: off after an exception");
  }

  auto store = c10::make_intrusive<c10d::HashStore>();
  // Straight: 6 steps on one communication stage.
  ModelStage straight = Model(gpu);
  TrainingPosition straight_at;
  at::ScalarType logits_type = at::kFloat;
  {
    CommunicationStage comm(store, Nccl(), straight, straight_at);
    auto root = comm.Connect("straight", 0, 1);
    Check(root.ok(),
          "NCCL Connect (straight): " + (root.ok() ? std::string("ok") : root.status().ToString()));
    if (!root.ok()) return 1;
    StepRunner runner(straight, comm, straight_at, {/*bf16=*/true});
    Check(Steps(runner, 0, 6, &logits_type), "6 NCCL DDP steps with bf16 autocast");
    Check(logits_type == at::kBFloat16, "forward ran under bf16 autocast");
    Check(!at::autocast::is_autocast_enabled(at::kCUDA), "autocast off between steps");
  }

  // Rebuilt: 3 steps, abort the group, Connect under a new prefix, 3 more steps.
  ModelStage model = Model(gpu);
  TrainingPosition at;
  CommunicationStage comm(store, Nccl(), model, at);
  auto t = std::chrono::steady_clock::now();
  auto root = comm.Connect("gen0", 0, 1);
  const double connect_ms = MsSince(t);
  Check(root.ok() && *root == 0, "NCCL Connect gen0");
  if (!root.ok()) return 1;
  StepRunner runner(model, comm, at, {/*bf16=*/true});
  Check(Steps(runner, 0, 3, &logits_type), "3 steps on gen0");
  const at::Tensor before = model.model().parameters()[0].detach().clone();
  comm.MarkFailed();
  t = std::chrono::steady_clock::now();
  root = comm.Connect("gen1", 0, 1);  // aborts gen0's communicator, builds gen1
  const double rebuild_ms = MsSince(t);
  Check(root.ok() && comm.prefix() == "gen1" && comm.connects() == 2,
        "abort gen0 + Connect gen1: " + (root.ok() ? std::string("ok") : root.status().ToString()));
  if (!root.ok()) return 1;
  Check(at.step == 3 && torch::equal(model.model().parameters()[0], before),
        "model and position kept across the rebuild");
  StepRunner again(model, comm, at, {/*bf16=*/true});
  Check(Steps(again, 3, 3, &logits_type), "3 steps on gen1");
  Check(at == straight_at, "position equals the straight run's: " + DescribePosition(at));
  Check(SameState(model, straight), "weights and momentum bitwise equal to the straight run");
  t = std::chrono::steady_clock::now();
  const absl::Status down = comm.Disconnect();
  const double shutdown_ms = MsSince(t);
  Check(down.ok() && !comm.connected(), "shutdown gen1: " + down.ToString());
  std::printf("timings: connect %.1f ms, abort + rebuild + sync %.1f ms, shutdown %.1f ms\n",
              connect_ms, rebuild_ms, shutdown_ms);
  std::printf("%s: %d failure(s)\n", failures == 0 ? "ALL PASSED" : "FAILED", failures);
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace ddp

int main() { return ddp::Main(); }
