// What the straggler detection's step section timing costs the training thread: the marks a
// step makes on the real ProgressReporter (trainer/worker/progress_reporter.h; the sequence
// StepRunner makes: data, forward, backward, a collective wait begun and ended, optimizer) against
// the training step itself (forward, backward, SGD) on the same model, image size and batch, one
// thread, CPU, both measured in this process. Two figures:
//   * marks_ns: the median time of one step's marks, timed over many repetitions, and its share
//     of the median step (share = marks / step): the cost itself;
//   * the median step time with the marks and without them, over steps that alternate between
//     the two (ab = with / without): the same cost seen from the step, within the step's noise.
//
//   section_timing_bench --arch resnet18 --image 32 --batch 32 [--steps 20] [--reps 100000]
#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/time/time.h"
#include "bench/ddp/cpu_step.h"
#include "trainer/worker/progress_reporter.h"

using ddp::bench::Clock;
using ddp::bench::Median;
using ddp::bench::Since;

int main(int argc, char** argv) {
  CLI::App app("step section timing cost against a training step");
  std::string arch = "resnet18";
  int image = 32, batch = 32, steps = 20, reps = 100000;
  app.add_option("--arch", arch);
  app.add_option("--image", image, "square image side");
  app.add_option("--batch", batch);
  app.add_option("--steps", steps, "steps with the marks and as many without, alternating");
  app.add_option("--reps", reps, "repetitions of one step's marks");
  CLI11_PARSE(app, argc, argv);
  absl::StatusOr<ddp::bench::CpuStep> cpu = ddp::bench::MakeCpuStep(arch, image, batch);
  if (!cpu.ok()) {
    std::fprintf(stderr, "%s\n", std::string(cpu.status().message()).c_str());
    return 1;
  }

  // No coordinator: the reporter's thread sends its first heartbeat after a period, never here.
  ddp::ProgressReporterOptions options;
  options.period = absl::Hours(24);
  ddp::ProgressReporter reporter(nullptr, options);
  auto marks = [&reporter] {
    reporter.MarkPhase(ddp::StepPhase::kData);
    reporter.MarkPhase(ddp::StepPhase::kForward);
    reporter.MarkPhase(ddp::StepPhase::kBackward);
    reporter.MarkCollectiveWait(true);
    reporter.MarkCollectiveWait(false);
    reporter.MarkPhase(ddp::StepPhase::kOptimizer);
  };
  auto step = [&](bool marked) {
    if (marked) reporter.MarkPhase(ddp::StepPhase::kData);
    if (marked) reporter.MarkPhase(ddp::StepPhase::kForward);
    at::Tensor loss =
        at::cross_entropy_loss(cpu->model.model().forward(cpu->batch.images), cpu->batch.labels);
    if (marked) reporter.MarkPhase(ddp::StepPhase::kBackward);
    loss.backward();
    if (marked) reporter.MarkCollectiveWait(true);
    if (marked) reporter.MarkCollectiveWait(false);
    if (marked) reporter.MarkPhase(ddp::StepPhase::kOptimizer);
    cpu->model.optimizer().Step(0.01);
    for (auto& p : cpu->model.model().parameters()) p.mutable_grad() = at::Tensor();
  };
  step(true);  // warm-up
  step(false);
  std::vector<double> with_s, without_s;
  for (int i = 0; i < 2 * steps; ++i) {
    const bool marked = (i % 2 == 0) == ((i / 2) % 2 == 0);  // on, off, off, on, on, off, ...
    const auto t = Clock::now();
    step(marked);
    (marked ? with_s : without_s).push_back(Since(t));
  }
  std::vector<double> marks_s;
  constexpr int kBatch = 100;  // marks sequences per timing (the clock read is ~20 ns itself)
  for (int r = 0; r < reps / kBatch; ++r) {
    const auto t = Clock::now();
    for (int k = 0; k < kBatch; ++k) marks();
    marks_s.push_back(Since(t) / kBatch);
  }
  const double marks_ns = Median(marks_s) * 1e9;
  const double with_ms = Median(with_s) * 1e3, without_ms = Median(without_s) * 1e3;
  std::printf(
      "arch=%s image=%d batch=%d marks_ns=%.0f step_ms=%.1f share=%.6f%% with_ms=%.2f "
      "without_ms=%.2f ab=%.4f steps=%d\n",
      arch.c_str(), image, batch, marks_ns, without_ms, 100.0 * marks_ns / (without_ms * 1e6),
      with_ms, without_ms, with_ms / without_ms, steps);
  return 0;
}
