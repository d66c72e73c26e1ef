// StepMeters: the progress columns average every step, weighted by samples; the coordinator's
// window restarts only when asked.
#include "trainer/worker/step_meters.h"

#include <ATen/ops/full.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include <vector>

namespace ddp {
namespace {

// Logits of `n` samples over 6 classes whose top-1 guess is class 0 and whose top-5 guesses are
// classes 0..4; labels: the first `top1` samples are class 0, the next `top5_only` class 3, the
// rest class 5 (never in the top 5).
struct Batch {
  at::Tensor logits, labels;
};
Batch MakeBatch(int64_t n, int64_t top1, int64_t top5_only) {
  at::Tensor logits = at::zeros({n, 6});
  for (int64_t c = 0; c < 5; ++c) logits.select(1, c).fill_(static_cast<double>(10 - c));
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < n; ++i) labels.push_back(i < top1 ? 0 : i < top1 + top5_only ? 3 : 5);
  return {logits, at::tensor(labels, at::kLong)};
}

TEST(StepMetersTest, AveragesEveryStepWeightedBySamples) {
  StepMeters m;
  Batch a = MakeBatch(4, 4, 0);  // 100% top-1
  Batch b = MakeBatch(4, 0, 4);  // 0% top-1, 100% top-5
  Batch c = MakeBatch(2, 1, 0);  // 50% top-1, 50% top-5
  m.Add(at::full({}, 1.0), a.logits, a.labels);
  m.Add(at::full({}, 2.0), b.logits, b.labels);
  m.Add(at::full({}, 4.0), c.logits, c.labels);
  const MeterReading r = m.Read(/*restart_since_previous=*/false);
  EXPECT_DOUBLE_EQ(r.loss_last, 4.0);
  EXPECT_DOUBLE_EQ(r.top1_last, 50.0);
  EXPECT_DOUBLE_EQ(r.top5_last, 50.0);
  EXPECT_DOUBLE_EQ(r.loss_avg, (4 * 1.0 + 4 * 2.0 + 2 * 4.0) / 10);
  EXPECT_DOUBLE_EQ(r.top1_avg, 100.0 * 5 / 10);
  EXPECT_DOUBLE_EQ(r.top5_avg, 100.0 * 9 / 10);
  EXPECT_EQ(m.steps(), 3);
}

TEST(StepMetersTest, TheCoordinatorsWindowRestartsOnlyWhenAsked) {
  StepMeters m;
  Batch b = MakeBatch(2, 2, 0);
  m.Add(at::full({}, 3.0), b.logits, b.labels);
  m.Add(at::full({}, 5.0), b.logits, b.labels);
  MeterReading r = m.Read(false);  // a printed line: the window goes on
  EXPECT_DOUBLE_EQ(r.loss_since_previous, 4.0);
  r = m.Read(true);
  EXPECT_DOUBLE_EQ(r.loss_since_previous, 4.0);
  EXPECT_EQ(r.steps_since_previous, 2);
  m.Add(at::full({}, 9.0), b.logits, b.labels);
  r = m.Read(true);
  EXPECT_DOUBLE_EQ(r.loss_since_previous, 9.0);  // only the step since the previous refresh
  EXPECT_EQ(r.steps_since_previous, 1);
  EXPECT_DOUBLE_EQ(r.loss_avg, (3.0 + 5.0 + 9.0) / 3);  // the epoch's average is untouched
  r = m.Read(true);
  EXPECT_EQ(r.steps_since_previous, 0);
  EXPECT_DOUBLE_EQ(r.loss_since_previous, 0.0);
}

TEST(StepMetersTest, NothingAddedReadsZeros) {
  StepMeters m;
  const MeterReading r = m.Read(true);
  EXPECT_EQ(r.loss_avg, 0);
  EXPECT_EQ(r.top1_avg, 0);
  EXPECT_EQ(m.steps(), 0);
}

}  // namespace
}  // namespace ddp
