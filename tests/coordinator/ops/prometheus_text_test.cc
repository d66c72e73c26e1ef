#include "coordinator/ops/prometheus_text.h"

#include <cmath>
#include <limits>
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
}

TEST(PrometheusTextTest, LabelsAndFamilies) {
  EXPECT_EQ(PromLabel("node\"1\\\nx"), "node\\\"1\\\\\\nx");
  std::string out;
  AppendPromGauge(&out, "ddp_x", "An x", 3);
  EXPECT_EQ(out, "# HELP ddp_x An x\n# TYPE ddp_x gauge\nddp_x 3\n");
}

}  // namespace
}  // namespace ddp
