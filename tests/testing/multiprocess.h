// Runs a test body in N real processes on loopback: the test binary re-executes itself
// (/proc/self/exe) with DDP_TEST_RANK / DDP_TEST_WORLD_SIZE / DDP_TEST_STORE set and a gtest
// filter selecting the same test, so each rank is a fresh process with no inherited threads.
//
//   TEST(Gloo, Allreduce) {
//     if (ddp::testing::IsChild()) { ...rank body using ChildRank()...; return; }
//     auto results = ddp::testing::RunRanks(4, absl::Seconds(60));
//     for (auto& r : results) EXPECT_EQ(r.exit_code, 0) << r.output;
//   }
//
// Thread safety: call from the test's main thread only.
#ifndef SLURM_DDP_TESTS_TESTING_MULTIPROCESS_H_
#define SLURM_DDP_TESTS_TESTING_MULTIPROCESS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace ddp::testing {

struct RankResult {
  int rank = 0;
  int exit_code = -1;  // -1 if killed by a signal or timed out
  bool timed_out = false;
  int term_signal = 0;  // the signal that ended the rank, 0 if none (said in `output` too)
  std::string output;   // stdout + stderr of the rank
};

bool IsChild();
int ChildRank();
int ChildWorldSize();
// A path shared by all ranks of one RunRanks call (e.g. for a c10d::FileStore); unique per call.
std::string ChildStorePath();

// Starts `world_size` copies of the current test, waits for all (killing every rank still
// running after `timeout`), and returns their results in rank order. `extra_env` is added to
// every child's environment.
std::vector<RankResult> RunRanks(
    int world_size, absl::Duration timeout,
    const std::vector<std::pair<std::string, std::string>>& extra_env = {});

}  // namespace ddp::testing

#endif  // SLURM_DDP_TESTS_TESTING_MULTIPROCESS_H_
