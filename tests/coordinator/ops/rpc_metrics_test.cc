#include "coordinator/ops/rpc_metrics.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;

TEST(RpcMetricsTest, CountsByMethodAndCode) {
  RpcMetrics m({"Heartbeat", "Register"});
  struct Call {
    const char* method;
    int code;
    absl::Duration latency;
  };
  const std::vector<Call> calls = {
      {"/slurm_ddp.v1.Coordinator/Heartbeat", 0, absl::Microseconds(50)},
      {"Heartbeat", 0, absl::Milliseconds(3)},
      {"Heartbeat", 16, absl::Milliseconds(1)},
      {"Register", 4, absl::Seconds(10)},
      {"Bogus", 0, absl::Milliseconds(1)},
      {"Heartbeat", 99, absl::Milliseconds(1)},  // out of range: UNKNOWN
  };
  for (const Call& c : calls) m.Record(c.method, c.code, c.latency);
  EXPECT_EQ(m.Count("Heartbeat"), 4u);
  EXPECT_EQ(m.Count("Register"), 1u);
  EXPECT_EQ(m.Count("Nope"), 1u);  // every unknown method counts as "other"
  m.RecordHttp("/metrics", 200);
  m.RecordHttp("/metrics", 401);
  m.RecordHttp("/nowhere", 404);
  std::string out;
  m.AppendPrometheus(&out);
  for (const char* want : {
           "ddp_rpc_requests_total{method=\"Heartbeat\",code=\"OK\"} 2",
           "ddp_rpc_requests_total{method=\"Heartbeat\",code=\"UNAUTHENTICATED\"} 1",
           "ddp_rpc_requests_total{method=\"Heartbeat\",code=\"UNKNOWN\"} 1",
           "ddp_rpc_requests_total{method=\"Register\",code=\"DEADLINE_EXCEEDED\"} 1",
           "ddp_rpc_requests_total{method=\"other\",code=\"OK\"} 1",
           "ddp_rpc_duration_seconds_bucket{method=\"Heartbeat\",le=\"0.0001\"} 1",
           "ddp_rpc_duration_seconds_bucket{method=\"Register\",le=\"+Inf\"} 1",
           "ddp_rpc_duration_seconds_count{method=\"Heartbeat\"} 4",
           "ddp_http_requests_total{path=\"/metrics\",code=\"200\"} 1",
           "ddp_http_requests_total{path=\"/metrics\",code=\"401\"} 1",
           "ddp_http_requests_total{path=\"other\",code=\"other\"} 1",
       }) {
    EXPECT_THAT(out, HasSubstr(want));
  }
}

}  // namespace
}  // namespace ddp
