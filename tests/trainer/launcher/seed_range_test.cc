// Every --seed ddp-trainer accepts (any int64) gives a defined data order. The sampler seeds
// torch's generator with (seed + epoch) mod 2^32; computed as a signed sum, a seed near INT64_MAX
// overflowed (undefined behaviour). This test compiles common/sampler_plan.cc itself with
// -fsanitize=signed-integer-overflow -fno-sanitize-recover, so such an overflow aborts it.
#include <cstdint>
#include <limits>
#include <vector>

#include "common/sampler_plan.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

ShardAssignment Epoch(int64_t seed, int64_t epoch) {
  ShardAssignment a;
  a.dataset_size = 97;
  a.seed = seed;
  a.epoch = epoch;
  a.world_size = 4;
  a.consumed_world_size = 4;
  return a;
}

TEST(SeedRangeTest, ExtremeSeedsGiveTheOrderOfTheirSumModulo2To64) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  // 2^63 - 1 + 3 = 2^63 + 2: its low 32 bits, which torch's mt19937 keeps, are 2.
  const std::vector<int64_t> want = GlobalOrder(Epoch(2, 0));
  ASSERT_EQ(want.size(), 100u);
  EXPECT_EQ(GlobalOrder(Epoch(kMax, 3)), want);
  EXPECT_EQ(GlobalOrder(Epoch(kMin + 2, 0)), want);
  EXPECT_EQ(GlobalOrder(Epoch(kMax - 97, 100)), want) << "2^63 + 2 again";
  // Negative seeds: -1 + 1 = 0 (torch maps a negative seed to its two's complement).
  EXPECT_EQ(GlobalOrder(Epoch(-1, 1)), GlobalOrder(Epoch(0, 0)));
  EXPECT_EQ(ShardIndices(Epoch(kMax, 100000)), ShardIndices(Epoch(kMin + 99999, 0)));
}

TEST(SeedRangeTest, NormalSeedsAreUnchanged) {
  // The order torch.randperm(97, generator=manual_seed(42 + 5)) gives, as TorchRandperm does.
  std::vector<int64_t> perm = TorchRandperm(97, 47);
  std::vector<int64_t> order = GlobalOrder(Epoch(42, 5));
  order.resize(97);
  EXPECT_EQ(order, perm);
}

}  // namespace
}  // namespace ddp
