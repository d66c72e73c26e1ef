#include "coordinator/job/shard_ledger.h"

#include <optional>
#include <vector>

#include "gtest/gtest.h"

namespace ddp {
namespace {

ShardRequest Req(int64_t epoch, int64_t seed = 7, int64_t resume = 0, int resume_world = 0) {
  ShardRequest r;
  r.epoch = epoch;
  r.dataset_size = 100;
  r.seed = seed;
  r.resume_consumed = resume;
  r.resume_world_size = resume_world;
  return r;
}

TEST(ShardLedgerTest, AgreementAndOrder) {
  struct Call {
    int rank;
    ShardRequest request;
    bool ok;
  };
  struct Case {
    const char* name;
    std::vector<Call> calls;
  };
  const std::vector<Case> cases = {
      {"every rank agrees", {{0, Req(1), true}, {1, Req(1), true}}},
      {"a rank disagrees on the seed", {{0, Req(1), true}, {1, Req(1, 8), false}}},
      {"a rank disagrees on the resume", {{0, Req(1), true}, {1, Req(1, 7, 40, 2), false}}},
      {"epochs go forward", {{0, Req(2), true}, {0, Req(1), false}}},
      {"same epoch again is fine", {{0, Req(2), true}, {0, Req(2), true}}},
      {"a refused call records nothing",
       {{0, Req(1), true}, {1, Req(1, 8), false}, {1, Req(1), true}}},
  };
  for (const Case& c : cases) {
    ShardLedger ledger(2);
    for (size_t i = 0; i < c.calls.size(); ++i) {
      const Call& call = c.calls[i];
      auto a = ledger.Assign(call.rank, call.request, std::nullopt);
      EXPECT_EQ(a.ok(), call.ok) << c.name << " call " << i << ": " << a.status();
      if (!a.ok()) {
        EXPECT_TRUE(absl::IsInvalidArgument(a.status()));
      }
      if (a.ok()) {
        EXPECT_EQ(a->rank, call.rank);
        EXPECT_EQ(a->world_size, 2);
        EXPECT_EQ(a->epoch, call.request.epoch);
      }
    }
  }
}

TEST(ShardLedgerTest, ResumePosition) {
  struct Case {
    const char* name;
    ShardRequest request;
    std::optional<int64_t> checkpoint_consumed;
    int64_t want_consumed;
    int want_consumed_world;
  };
  const std::vector<Case> cases = {
      {"fresh epoch", Req(1), std::nullopt, 0, 2},
      {"this generation's checkpoint", Req(1), 40, 40, 2},
      {"the checkpoint wins over the request", Req(1, 7, 30, 3), 40, 40, 2},
      {"resume from an earlier generation", Req(1, 7, 30, 3), std::nullopt, 30, 3},
  };
  for (const Case& c : cases) {
    ShardLedger ledger(2);
    auto a = ledger.Assign(0, c.request, c.checkpoint_consumed);
    ASSERT_TRUE(a.ok()) << c.name << ": " << a.status();
    EXPECT_EQ(a->consumed, c.want_consumed) << c.name;
    EXPECT_EQ(a->consumed_world_size, c.want_consumed_world) << c.name;
  }
}

}  // namespace
}  // namespace ddp
