#include "bench/loadgen/agent_line.h"

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace ddp::bench {
namespace {

TEST(AgentLineTest, FieldsRoundTrip) {
  const std::string line = ReplyFields()
                               .Add("done_ns", int64_t{1234567890123})
                               .Add("rate", 1026.25)
                               .Add("state", std::string("RUNNING"))
                               .Add("lat", Quantiles{5, 1.5, 2.5, 3.5})
                               .Format();
  auto r = AgentReply::Parse(line);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r->Int("done_ns"), 1234567890123);
  EXPECT_DOUBLE_EQ(*r->Double("rate"), 1026.25);
  EXPECT_EQ(*r->String("state"), "RUNNING");
  const Quantiles q = *r->Summary("lat");
  EXPECT_EQ(q.count, 5u);
  EXPECT_DOUBLE_EQ(q.p50, 1.5);
  EXPECT_DOUBLE_EQ(q.p99, 2.5);
  EXPECT_DOUBLE_EQ(q.max, 3.5);
}

TEST(AgentLineTest, ValuesLoseSpacesAndEmptyBecomesDash) {
  auto r = AgentReply::Parse(
      ReplyFields().Add("e", std::string("a b\nc")).Add("x", std::string()).Format());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r->String("e"), "a_b_c");
  EXPECT_EQ(*r->String("x"), "-");
}

TEST(AgentLineTest, ErrorLineBecomesStatusWithItsText) {
  auto r = AgentReply::Parse(FormatError("3 ranks failed;\nfirst: Hello"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "3 ranks failed; first: Hello");
}

TEST(AgentLineTest, MalformedLines) {
  for (const char* line : {"", "okay x=1", "ok x", "ok =1", "hello"}) {
    EXPECT_FALSE(AgentReply::Parse(line).ok()) << line;
  }
  auto bare = AgentReply::Parse("ok\n");
  ASSERT_TRUE(bare.ok());
  EXPECT_FALSE(bare->Has("x"));
}

TEST(AgentLineTest, WrongTypesAndMissingFields) {
  auto r = AgentReply::Parse("ok n=12x d=abc");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->Int("n").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r->Double("d").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r->Int("missing").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(r->Summary("lat").ok());
}

TEST(AgentLineTest, PhaseReplyOkAndFailed) {
  PhaseReport ok;
  ok.done_ns = 42;
  ok.latency = Quantiles{2, 1, 2, 2};
  auto r = AgentReply::Parse(PhaseReply(ok));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r->Int("done_ns"), 42);
  EXPECT_EQ(r->Summary("lat")->count, 2u);

  PhaseReport bad;
  bad.failed = 3;
  bad.first_error = "Register: 4 Deadline Exceeded";
  auto e = AgentReply::Parse(PhaseReply(bad));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("3 ranks failed"), absl::string_view::npos);
  EXPECT_NE(e.status().message().find("Deadline Exceeded"), absl::string_view::npos);
}

}  // namespace
}  // namespace ddp::bench
