// State sync across 3 real processes (Gloo on loopback): ranks that hold different weights,
// momentum (different slots present), positions, bucket orders and random generators all end
// with exactly the state of the rank with the highest step, the lower rank winning a tie.
#include "trainer/worker/state_sync.h"

#include <torch/torch.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/child_store.h"
#include "tests/testing/multiprocess.h"
#include "tests/trainer/worker/worker_test_util.h"
#include "trainer/ddp/process_group_handle.h"

namespace ddp {
namespace {

constexpr int kWorld = 3;

// What rank `r` holds before the sync; a function of `r` only, so any rank can rebuild it.
struct Held {
  TrainingPosition position;
  std::vector<size_t> order;
};

Held Hold(int r, ModelStage& model) {
  Held h;
  const int64_t steps[kWorld] = {5, 9, 9};
  h.position = {r, steps[r], 16 * (r + 1), 3};
  // Momentum in some slots: rank r steps with gradients on every (r + 2)-th parameter only.
  auto params = model.model().parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    if (i % static_cast<size_t>(r + 2) == 0) {
      params[i].mutable_grad() = torch::full_like(params[i], 0.5 * (r + 1));
    }
  }
  model.optimizer().Step(0.1);
  for (auto& p : params) p.mutable_grad().reset();
  // A bucket order of its own (a rotation of the parameter indices).
  for (size_t i = 0; i < params.size(); ++i) h.order.push_back((i + r) % params.size());
  torch::manual_seed(1000 + r);  // the generator each rank would draw from next
  return h;
}

TEST(StateSync, EveryRankEndsWithTheStateOfTheLowestRankWithTheHighestStep) {
  if (!testing::IsChild()) {
    for (const auto& r : testing::RunRanks(kWorld, absl::Seconds(180))) {
      EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " timed out:\n" << r.output;
      EXPECT_EQ(r.exit_code, 0) << "rank " << r.rank << ":\n" << r.output;
    }
    return;
  }
  torch::set_num_threads(1);
  const int rank = testing::ChildRank();
  const testing::SmallRun c = testing::SmallConfig("cnn");
  const DataStage data = testing::OpenData(c);
  ModelStage mine = testing::BuildModel(c, data, 100 + rank);
  Held held = Hold(rank, mine);

  auto store = testing::ChildFileStore();
  ProcessGroupOptions options = testing::GlooOptions().process_group;
  auto pg = ProcessGroupHandle::Create(store, "sync", rank, kWorld, options);
  ASSERT_TRUE(pg.ok()) << pg.status();
  auto root = SyncTrainingState(pg->backend(), {mine, held.position, held.order});
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(*root, 1);
  const at::Tensor drawn = torch::rand({8});

  // Rank 1's state, rebuilt here.
  ModelStage want = testing::BuildModel(c, data, 100 + 1);
  const Held want_held = Hold(1, want);
  const at::Tensor want_drawn = torch::rand({8});
  EXPECT_EQ(held.position, want_held.position) << DescribePosition(held.position);
  EXPECT_EQ(held.order, want_held.order);
  testing::ExpectBitwiseEqual(mine, want, "rank " + std::to_string(rank));
  // Momentum slots present exactly where the root has them (rank 2 had more, rank 0 fewer).
  auto& got_slots = mine.optimizer().momentum_slots();
  auto& want_slots = want.optimizer().momentum_slots();
  ASSERT_EQ(got_slots.size(), want_slots.size());
  for (size_t i = 0; i < got_slots.size(); ++i) {
    EXPECT_EQ(got_slots[i].defined(), want_slots[i].defined()) << "slot " << i;
  }
  EXPECT_TRUE(torch::equal(drawn, want_drawn)) << "the random generator was not synced";
}

TEST(StateSync, TheRootIsTheHighestStepWhateverItsRank) {
  if (!testing::IsChild()) {
    for (const auto& r : testing::RunRanks(kWorld, absl::Seconds(120))) {
      EXPECT_EQ(r.exit_code, 0) << "rank " << r.rank << ":\n" << r.output;
    }
    return;
  }
  const int rank = testing::ChildRank();
  auto store = testing::ChildFileStore();
  auto pg =
      ProcessGroupHandle::Create(store, "root", rank, kWorld, testing::GlooOptions().process_group);
  ASSERT_TRUE(pg.ok()) << pg.status();
  const int64_t steps[kWorld] = {3, 2, 7};
  EXPECT_EQ(ChooseSyncRoot(pg->backend(), steps[rank], at::kCPU), 2);
  EXPECT_EQ(ChooseSyncRoot(pg->backend(), 4, at::kCPU), 0);  // all equal: the lowest rank
}

}  // namespace
}  // namespace ddp
