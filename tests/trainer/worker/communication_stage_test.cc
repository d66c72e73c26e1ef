// The communication stage rebuilt in place, in real processes on loopback (Gloo, 3 ranks, a
// CNN with BatchNorm, several DDP buckets): train, tear the process group and the DDP engine
// down, build them again under a new store prefix with the model, optimizer and position kept,
// while rank 0 is replaced by a fresh worker (new weights, no momentum, step 0, no bucket
// layout); the state comes from the most advanced rank, training continues, and every rank ends
// bitwise equal to an uninterrupted run of the same steps.
#include "trainer/worker/communication_stage.h"

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "tests/testing/child_store.h"
#include "tests/testing/multiprocess.h"
#include "tests/trainer/worker/worker_test_util.h"

namespace ddp {
namespace {

constexpr int kWorld = 3;
constexpr int kBefore = 5;  // steps before the rebuild
constexpr int kAfter = 6;   // steps after it

struct Job {
  testing::SmallRun config = testing::SmallConfig("cnn", 8 * kWorld * (kBefore + kAfter));
  DataStage data = testing::OpenData(config);
};

c10::intrusive_ptr<c10d::Store> SharedStore() { return testing::ChildFileStore(); }

TEST(CommunicationStage, RebuiltMidRunWithAReplacedRankEndsBitwiseEqualToAnUninterruptedRun) {
  if (!testing::IsChild()) {
    auto results = testing::RunRanks(kWorld, absl::Seconds(240));
    for (const auto& r : results) {
      EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " timed out:\n" << r.output;
      EXPECT_EQ(r.exit_code, 0) << "rank " << r.rank << ":\n" << r.output;
    }
    return;
  }
  torch::set_num_threads(1);
  const int rank = testing::ChildRank();
  Job run;
  const testing::SmallRun& c = run.config;
  auto store = SharedStore();

  // The uninterrupted run.
  ModelStage straight = testing::BuildModel(c, run.data, c.data.seed);
  TrainingPosition straight_at;
  std::vector<std::vector<size_t>> straight_buckets;
  {
    CommunicationStage comm(store, testing::GlooOptions(), straight, straight_at);
    auto root = comm.Connect("straight", rank, kWorld);
    ASSERT_TRUE(root.ok()) << root.status();
    EXPECT_EQ(*root, 0);  // all at step 0: the lowest rank
    auto loader = testing::LoaderAt(c, run.data, straight_at, rank, kWorld);
    testing::TrainSteps(c, straight, comm, straight_at, *loader, kWorld, kBefore + kAfter);
    straight_buckets = comm.ddp().reducer().bucket_assignment();
    ASSERT_TRUE(comm.Disconnect().ok());
  }
  ASSERT_EQ(straight_at.step, kBefore + kAfter);

  // The same steps, with the communication stage rebuilt after kBefore of them.
  auto model = std::make_unique<ModelStage>(testing::BuildModel(c, run.data, c.data.seed));
  auto at = std::make_unique<TrainingPosition>();
  auto comm = std::make_unique<CommunicationStage>(store, testing::GlooOptions(), *model, *at);
  ASSERT_TRUE(comm->Connect("gen0", rank, kWorld).ok());
  {
    auto loader = testing::LoaderAt(c, run.data, *at, rank, kWorld);
    testing::TrainSteps(c, *model, *comm, *at, *loader, kWorld, kBefore);
  }
  ASSERT_EQ(at->step, kBefore);
  const std::string before_prefix = comm->prefix();
  if (rank == 0) {
    // Rank 0 is lost and replaced: a fresh worker holds other weights and nothing else.
    comm->MarkFailed();
    comm.reset();
    model = std::make_unique<ModelStage>(testing::BuildModel(c, run.data, c.data.seed + 99));
    at = std::make_unique<TrainingPosition>();
    comm = std::make_unique<CommunicationStage>(store, testing::GlooOptions(), *model, *at);
    EXPECT_TRUE(comm->gradient_order().empty());
  }
  auto root = comm->Connect("gen1", rank, kWorld);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(*root, 1) << "ranks 1 and 2 hold step 5; the lower of them is the root";
  EXPECT_EQ(comm->prefix(), "gen1");
  EXPECT_NE(comm->prefix(), before_prefix);
  EXPECT_EQ(at->step, kBefore);
  EXPECT_EQ(at->consumed, kBefore * c.batch_size * kWorld);
  EXPECT_FALSE(comm->gradient_order().empty());
  // The new engine uses the bucket layout the uninterrupted run had settled on.
  EXPECT_EQ(comm->ddp().reducer().bucket_assignment(), straight_buckets);
  {
    // Every rank continues from the synced position, as a resumed worker would.
    auto loader = testing::LoaderAt(c, run.data, *at, rank, kWorld);
    testing::TrainSteps(c, *model, *comm, *at, *loader, kWorld, kAfter);
  }
  EXPECT_EQ(*at, straight_at) << DescribePosition(*at) << " vs " << DescribePosition(straight_at);
  testing::ExpectBitwiseEqual(*model, straight, "rank " + std::to_string(rank));
  EXPECT_TRUE(comm->Disconnect().ok());
  EXPECT_FALSE(comm->connected());
}

}  // namespace
}  // namespace ddp
