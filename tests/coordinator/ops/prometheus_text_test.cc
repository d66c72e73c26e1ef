#include "coordinator/ops/prometheus_text.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ddp {
namespace {

TEST(PrometheusTextTest, Values) {
  struct Case {
    double v;
    const char* want;
  };
  const std::vector<Case> cases = {
      {0, "0"},
      {1.5, "1.5"},
      {-2, "-2"},
      {std::nan(""), "NaN"},
      {std::numeric_limits<double>::infinity(), "+Inf"},
      {-std::numeric_limits<double>::infinity(), "-Inf"},
      {123456789012.0, "1.23456789e+11"},
  };
  for (const Case& c : cases) EXPECT_EQ(PromValue(c.v), c.want) << c.v;
  // Finite values are printf's %.9g (written with std::to_chars).
  std::mt19937_64 rng(5);
  for (int i = 0; i < 20000; ++i) {
    const double mantissa = std::uniform_real_distribution<double>(-10, 10)(rng);
    const double v = std::ldexp(mantissa, std::uniform_int_distribution<int>(-60, 60)(rng));
    char want[64];
    std::snprintf(want, sizeof(want), "%.9g", v);
    ASSERT_EQ(PromValue(v), want) << v;
  }
}

TEST(PrometheusTextTest, LabelsAndFamilies) {
  EXPECT_EQ(PromLabel("node\"1\\\nx"), "node\\\"1\\\\\\nx");
  std::string out;
  AppendPromGauge(&out, "ddp_x", "An x", 3);
  EXPECT_EQ(out, "# HELP ddp_x An x\n# TYPE ddp_x gauge\nddp_x 3\n");
}

}  // namespace
}  // namespace ddp
