// DataStage: opens both splits of --data with --seed, and names a bad flag value.
#include "trainer/worker/data_stage.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/trainer/worker/worker_test_util.h"

namespace ddp {
namespace {

TEST(DataStage, OpensBothSplits) {
  const testing::SmallRun c = testing::SmallConfig("mlp", 96);
  auto data = DataStage::Open(c.data);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->train().size(), 96);
  EXPECT_GT(data->test().size(), 0);
  EXPECT_EQ(data->train().num_classes(), 10);
  EXPECT_EQ(data->train().sample_shape(), (std::vector<int64_t>{1, 8, 8}));
}

TEST(DataStage, NamesABadSpecOrNormalization) {
  DataStage::Options c = testing::SmallConfig().data;
  c.data = "nosuchset:/tmp";
  auto bad = DataStage::Open(c);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("nosuchset"), std::string::npos) << bad.status();
  c = testing::SmallConfig().data;
  c.normalize = "0.5";
  auto norm = DataStage::Open(c);
  ASSERT_FALSE(norm.ok());
}

}  // namespace
}  // namespace ddp
