// Four real processes on loopback build ProcessGroupGloo from C++ (through the factory the
// trainer uses) and run allreduce, broadcast and barrier on several sizes and dtypes.
#include "trainer/ddp/process_group.h"

#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "gtest/gtest.h"
#include "tests/testing/child_store.h"
#include "tests/testing/multiprocess.h"

namespace ddp {
namespace {

constexpr int kWorld = 4;

c10::intrusive_ptr<c10d::Backend> MakeGloo() {
  auto store = testing::ChildFileStore();
  ProcessGroupOptions options;
  options.backend = BackendKind::kGloo;
  options.timeout = std::chrono::seconds(60);
  options.gloo_hostname = "127.0.0.1";
  auto pg = CreateProcessGroup(store, testing::ChildRank(), testing::ChildWorldSize(), options);
  if (!pg.ok()) {
    std::fprintf(stderr, "%s\n", std::string(pg.status().message()).c_str());
    std::exit(3);
  }
  return *pg;
}

// Child bodies fail through gtest assertions; the parent checks every child's exit code.
void ExpectAllRanksPassed(const std::vector<testing::RankResult>& results) {
  ASSERT_EQ(results.size(), static_cast<size_t>(kWorld));
  for (const auto& r : results) {
    EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " timed out:\n" << r.output;
    EXPECT_EQ(r.exit_code, 0) << "rank " << r.rank << ":\n" << r.output;
  }
}

TEST(GlooProcessGroup, AllreduceSumAndAverageAcrossDtypesAndSizes) {
  if (!testing::IsChild()) {
    ExpectAllRanksPassed(testing::RunRanks(kWorld, absl::Seconds(120)));
    return;
  }
  auto pg = MakeGloo();
  const int rank = testing::ChildRank();
  const int world = testing::ChildWorldSize();
  for (auto dtype : {torch::kFloat32, torch::kFloat64, torch::kInt32, torch::kInt64}) {
    for (int64_t n : {1, 1000, 1 << 20}) {
      // Rank r contributes (r + 1) * (i % 7 + 1) at element i.
      auto base = torch::arange(n, torch::kInt64).remainder(7).add(1);
      std::vector<at::Tensor> t = {(base * (rank + 1)).to(dtype)};
      pg->allreduce(t)->wait();
      const int64_t factor = world * (world + 1) / 2;
      ASSERT_TRUE(torch::equal(t[0], (base * factor).to(dtype))) << "dtype " << dtype << " n " << n;
      if (dtype == torch::kFloat32 || dtype == torch::kFloat64) {
        auto avg = t[0] / world;  // average as sum / world, as DDP does
        ASSERT_TRUE(torch::allclose(avg, (base * factor).to(dtype) / world));
      }
    }
  }
}

TEST(GlooProcessGroup, BroadcastFromEveryRootAndBarrier) {
  if (!testing::IsChild()) {
    ExpectAllRanksPassed(testing::RunRanks(kWorld, absl::Seconds(120)));
    return;
  }
  auto pg = MakeGloo();
  const int rank = testing::ChildRank();
  for (int root = 0; root < testing::ChildWorldSize(); ++root) {
    for (auto dtype : {torch::kFloat32, torch::kInt64, torch::kUInt8}) {
      for (int64_t n : {3, 65536}) {
        auto expected = torch::full({n}, root * 10 + 1, torch::kInt64).to(dtype);
        std::vector<at::Tensor> t = {rank == root ? expected.clone() : torch::zeros({n}, dtype)};
        c10d::BroadcastOptions opts;
        opts.rootRank = root;
        pg->broadcast(t, opts)->wait();
        ASSERT_TRUE(torch::equal(t[0], expected)) << "root " << root << " dtype " << dtype;
      }
    }
    pg->barrier()->wait();
  }
}

TEST(ProcessGroupFactory, RejectsBadRankAndUnknownBackend) {
  EXPECT_FALSE(ParseBackendKind("mpi").ok());
  EXPECT_EQ(*ParseBackendKind("gloo"), BackendKind::kGloo);
  auto store = c10::make_intrusive<c10d::HashStore>();
  ProcessGroupOptions options;
  options.backend = BackendKind::kGloo;
  auto pg = CreateProcessGroup(store, 2, 2, options);
  EXPECT_EQ(pg.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ddp
