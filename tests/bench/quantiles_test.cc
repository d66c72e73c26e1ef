#include "bench/loadgen/quantiles.h"

#include <vector>

#include "gtest/gtest.h"

namespace ddp::bench {
namespace {

TEST(QuantilesTest, EmptySampleIsAllZero) {
  std::vector<double> v;
  const Quantiles q = Summarize(&v);
  EXPECT_EQ(q.count, 0u);
  EXPECT_EQ(q.p50, 0);
  EXPECT_EQ(q.max, 0);
}

TEST(QuantilesTest, NearestRankOfUnsortedSample) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);  // 100 .. 1
  const Quantiles q = Summarize(&v);
  EXPECT_EQ(q.count, 100u);
  EXPECT_EQ(q.p50, 51);  // index 50 of 1..100
  EXPECT_EQ(q.p99, 100);
  EXPECT_EQ(q.max, 100);
}

TEST(QuantilesTest, SingleValue) {
  std::vector<double> v = {7.5};
  const Quantiles q = Summarize(&v);
  EXPECT_EQ(q.p50, 7.5);
  EXPECT_EQ(q.p99, 7.5);
  EXPECT_EQ(q.max, 7.5);
}

TEST(QuantilesTest, WorstTakesTheLargestOfEachAndSumsCounts) {
  const Quantiles a{10, 1.0, 9.0, 12.0};
  const Quantiles b{30, 2.0, 5.0, 20.0};
  const Quantiles empty{};
  const Quantiles w = Worst({a, empty, b});
  EXPECT_EQ(w.count, 40u);
  EXPECT_EQ(w.p50, 2.0);
  EXPECT_EQ(w.p99, 9.0);
  EXPECT_EQ(w.max, 20.0);
}

}  // namespace
}  // namespace ddp::bench
