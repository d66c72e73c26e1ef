// What the step rollback (trainer/worker/step_rollback.h) costs per step: the time of one
// StepRollback::Save (the copy of the model's buffers and the generators' states that every
// training step makes as it begins) against the time of the training step it protects (forward,
// backward, SGD), both measured in this process on the same model and data. One thread, CPU.
//
//   step_rollback_bench --arch resnet18 --image 32 --batch 32 [--saves 400] [--steps 5]
//
// Prints one line: arch, buffers (count, bytes), save_us (median), step_ms (median), and
// share = save / step.
#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/ddp/cpu_step.h"
#include "trainer/worker/step_rollback.h"

using ddp::bench::Clock;
using ddp::bench::Median;
using ddp::bench::Since;

int main(int argc, char** argv) {
  CLI::App app("step rollback cost against a training step");
  std::string arch = "resnet18";
  int image = 32, batch = 32, saves = 400, steps = 5;
  app.add_option("--arch", arch);
  app.add_option("--image", image, "square image side");
  app.add_option("--batch", batch);
  app.add_option("--saves", saves);
  app.add_option("--steps", steps);
  CLI11_PARSE(app, argc, argv);
  absl::StatusOr<ddp::bench::CpuStep> cpu = ddp::bench::MakeCpuStep(arch, image, batch);
  if (!cpu.ok()) {
    std::fprintf(stderr, "%s\n", std::string(cpu.status().message()).c_str());
    return 1;
  }
  ddp::ModelStage* model = &cpu->model;
  int64_t buffers = 0, bytes = 0;
  for (const auto& b : model->tensors().buffers) {
    ++buffers;
    bytes += b.tensor.numel() * static_cast<int64_t>(b.tensor.element_size());
  }

  ddp::StepRollback rollback(*model);
  std::vector<double> step_s, save_s;
  for (int i = 0; i < steps + 1; ++i) {  // the first step warms up
    const auto t = Clock::now();
    cpu->Run();
    if (i > 0) step_s.push_back(Since(t));
  }
  rollback.Save();  // warm-up
  for (int i = 0; i < saves; ++i) {
    const auto t = Clock::now();
    rollback.Save();
    save_s.push_back(Since(t));
  }
  const double save_us = Median(save_s) * 1e6, step_ms = Median(step_s) * 1e3;
  std::printf(
      "arch=%s image=%d batch=%d buffers=%ld buffer_bytes=%ld save_us=%.1f step_ms=%.1f "
      "share=%.5f%%\n",
      arch.c_str(), image, batch, static_cast<long>(buffers), static_cast<long>(bytes), save_us,
      step_ms, 100.0 * save_us / (step_ms * 1e3));
  return 0;
}
