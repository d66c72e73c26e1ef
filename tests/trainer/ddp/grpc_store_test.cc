// CoordinatorStore against an in-memory coordinator: c10d semantics key by key, timeouts that
// throw instead of hanging, and ProcessGroupGloo bootstrapping over it (ranks as threads).
#include "trainer/ddp/grpc_store.h"

#include <torch/torch.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/trainer/ddp/fake_coordinator.h"
#include "trainer/ddp/process_group.h"

namespace ddp {
namespace {

std::vector<uint8_t> Bytes(const std::string& s) { return {s.begin(), s.end()}; }

TEST(CoordinatorStore, SetGetAddCompareSetDeleteCheckNumKeys) {
  testing::FakeCoordinator fake;
  auto store = c10::make_intrusive<CoordinatorStore>(fake, "job/", std::chrono::seconds(5));
  store->set("a", Bytes("1"));
  EXPECT_EQ(store->get("a"), Bytes("1"));
  EXPECT_EQ(store->add("n", 5), 5);
  EXPECT_EQ(store->add("n", -2), 3);
  EXPECT_EQ(store->get("n"), Bytes("3"));
  // compareSet: HashStore semantics.
  EXPECT_EQ(store->compareSet("c", {}, Bytes("x")), Bytes("x"));          // absent + empty: set
  EXPECT_EQ(store->compareSet("c", Bytes("y"), Bytes("z")), Bytes("x"));  // mismatch: current
  EXPECT_EQ(store->compareSet("c", Bytes("x"), Bytes("z")), Bytes("z"));  // match: swapped
  EXPECT_EQ(store->compareSet("d", Bytes("q"), Bytes("z")), Bytes("q"));  // absent + expected
  EXPECT_TRUE(store->check({"a", "n", "c"}));
  EXPECT_FALSE(store->check({"a", "missing"}));
  EXPECT_EQ(store->getNumKeys(), 3);
  EXPECT_TRUE(store->deleteKey("a"));
  EXPECT_FALSE(store->deleteKey("a"));
  EXPECT_FALSE(store->check({"a"}));
  // Keys are prefixed in the coordinator.
  EXPECT_TRUE(*fake.StoreCheck({"job/n"}));
}

TEST(CoordinatorStore, GetAndWaitThrowDistStoreErrorAfterTimeout) {
  testing::FakeCoordinator fake;
  auto store = c10::make_intrusive<CoordinatorStore>(fake, "", std::chrono::milliseconds(200));
  const auto start = std::chrono::steady_clock::now();
  try {
    store->get("never");
    FAIL() << "get returned";
  } catch (const c10::DistStoreError& e) {
    EXPECT_NE(std::string(e.what()).find("Timeout"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("never"), std::string::npos) << e.what();
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(190));
  EXPECT_THROW(store->wait({"never"}), c10::DistStoreError);
  EXPECT_THROW(store->wait({"never"}, std::chrono::milliseconds(50)), c10::DistStoreError);
  store->setTimeout(std::chrono::milliseconds(50));
  EXPECT_THROW(store->get("never"), c10::DistStoreError);
}

TEST(CoordinatorStore, GetBlocksUntilAnotherThreadSetsAndCloneSharesTheClient) {
  testing::FakeCoordinator fake;
  auto store = c10::make_intrusive<CoordinatorStore>(fake, "p/", std::chrono::seconds(10));
  auto clone = store->clone();
  EXPECT_EQ(clone->getTimeout(), std::chrono::milliseconds(10000));
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    clone->set("late", Bytes("v"));
  });
  EXPECT_EQ(store->get("late"), Bytes("v"));
  store->wait({"late"});
  setter.join();
  // Concurrent atomic adds through clones.
  std::vector<std::thread> adders;
  for (int t = 0; t < 8; ++t) {
    adders.emplace_back([&] {
      auto mine = store->clone();
      for (int i = 0; i < 100; ++i) mine->add("counter", 1);
    });
  }
  for (auto& t : adders) t.join();
  EXPECT_EQ(store->add("counter", 0), 800);
}

TEST(CoordinatorStore, GlooProcessGroupBootstrapsOverIt) {
  testing::FakeCoordinator fake;
  constexpr int kWorld = 3;
  std::vector<std::string> errors(kWorld);
  std::vector<at::Tensor> results(kWorld);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < kWorld; ++rank) {
    ranks.emplace_back([&, rank] {
      auto store = c10::make_intrusive<CoordinatorStore>(fake, "gen0/", std::chrono::seconds(30));
      ProcessGroupOptions options;
      options.backend = BackendKind::kGloo;
      options.timeout = std::chrono::seconds(30);
      options.gloo_hostname = "127.0.0.1";
      auto pg = CreateProcessGroup(store, rank, kWorld, options);
      if (!pg.ok()) {
        errors[rank] = std::string(pg.status().message());
        return;
      }
      std::vector<at::Tensor> t = {torch::full({1000}, rank + 1.0)};
      (*pg)->allreduce(t)->wait();
      (*pg)->barrier()->wait();
      results[rank] = t[0];
      EXPECT_TRUE(ShutdownProcessGroup(**pg).ok());
    });
  }
  for (auto& t : ranks) t.join();
  for (int rank = 0; rank < kWorld; ++rank) {
    ASSERT_TRUE(errors[rank].empty()) << "rank " << rank << ": " << errors[rank];
    EXPECT_TRUE(torch::equal(results[rank], torch::full({1000}, 6.0))) << "rank " << rank;
  }
}

}  // namespace
}  // namespace ddp
