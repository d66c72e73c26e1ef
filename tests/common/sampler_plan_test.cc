#include "common/sampler_plan.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

struct Case {
  int64_t n;
  int world;
  int rank;
  int64_t epoch;
  bool drop_last;
  bool shuffle;
  int64_t seed;
};

ShardAssignment Assign(const Case& c) {
  ShardAssignment a;
  a.dataset_size = c.n;
  a.world_size = c.world;
  a.rank = c.rank;
  a.epoch = c.epoch;
  a.drop_last = c.drop_last;
  a.shuffle = c.shuffle;
  a.seed = c.seed;
  a.consumed_world_size = c.world;
  return a;
}

std::vector<Case> GoldenCases() {
  std::vector<Case> cases;
  for (int64_t n : {1, 2, 3, 7, 10, 17, 64, 100, 1000, 4097}) {
    for (int world : {1, 2, 3, 4, 8, 16}) {
      for (bool drop_last : {false, true}) {
        for (int64_t epoch : {0, 1, 5}) {
          int rank_step = world > 4 ? world / 3 : 1;
          for (int rank = 0; rank < world; rank += rank_step) {
            cases.push_back({n, world, rank, epoch, drop_last, true, epoch == 5 ? 1234 : 0});
          }
        }
      }
    }
  }
  cases.push_back({10, 3, 1, 0, false, false, 0});
  cases.push_back({10, 3, 2, 0, true, false, 0});
  cases.push_back({300000, 4, 3, 2, false, true, 42});
  return cases;
}

// Runs torch's own DistributedSampler for every case; one line of indices per case.
// Returns an empty vector (with `why`) when no usable Python torch is configured.
std::vector<std::vector<int64_t>> TorchGolden(const std::vector<Case>& cases, std::string* why) {
  const char* py = std::getenv("DDP_TORCH_PYTHON");
  if (py == nullptr || *py == '\0') {
    *why = "DDP_TORCH_PYTHON is empty (configure with -DDDP_TORCH_PYTHON=...)";
    return {};
  }
  std::string script =
      ::testing::TempDir() + "/sampler_golden_" + std::to_string(::getpid()) + ".py";
  {
    std::ofstream out(script);
    out << "import sys\ntry:\n  import torch\n  from torch.utils.data.distributed import "
           "DistributedSampler\nexcept Exception as e:\n  print('NOTORCH', e); sys.exit(0)\n"
           "cases = [";
    for (const Case& c : cases) {
      out << "(" << c.n << "," << c.world << "," << c.rank << "," << c.epoch << ","
          << (c.drop_last ? "True" : "False") << "," << (c.shuffle ? "True" : "False") << ","
          << c.seed << "),";
    }
    out << "]\nfor n, w, r, e, d, s, seed in cases:\n"
           "  smp = DistributedSampler(range(n), num_replicas=w, rank=r, shuffle=s, seed=seed, "
           "drop_last=d)\n  smp.set_epoch(e)\n  print(' '.join(map(str, list(smp))) or '-')\n";
  }
  std::string cmd = absl::StrCat("'", py, "' '", script, "' 2>&1");
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) {
    *why = "popen failed";
    return {};
  }
  std::string text;
  char buf[65536];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof(buf), pipe)) > 0) text.append(buf, got);
  int rc = ::pclose(pipe);
  std::remove(script.c_str());
  if (rc != 0 || text.rfind("NOTORCH", 0) == 0) {
    *why = absl::StrCat(py, " cannot run torch's DistributedSampler: ", text.substr(0, 300));
    return {};
  }
  std::vector<std::vector<int64_t>> rows;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<int64_t> row;
    if (line != "-") {
      std::istringstream nums(line);
      int64_t v;
      while (nums >> v) row.push_back(v);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

// "count checksum first last" of an index list, as testdata/make_sampler_golden.py writes it:
// the checksum sum(v * (i + 1)) mod 2^64 changes when any index is wrong or misplaced.
std::string Digest(const std::vector<int64_t>& v) {
  uint64_t sum = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    sum += static_cast<uint64_t>(v[i]) * static_cast<uint64_t>(i + 1);
  }
  return absl::StrCat(v.size(), " ", sum, " ", v.empty() ? -1 : v.front(), " ",
                      v.empty() ? -1 : v.back());
}

// The checked-in digests of torch's DistributedSampler output, one per case of GoldenCases()
// (testdata/distributed_sampler_golden.txt); the case keys must match the list here.
std::vector<std::string> CheckedInGolden(const std::vector<Case>& cases) {
  const char* src = std::getenv("DDP_SOURCE_DIR");
  const std::string path = absl::StrCat(src == nullptr ? "." : src,
                                        "/tests/common/testdata/distributed_sampler_golden.txt");
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path << " (DDP_SOURCE_DIR is set by ctest)";
  std::vector<std::string> digests;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t colon = line.find(" : ");
    if (colon == std::string::npos || digests.size() >= cases.size()) {
      ADD_FAILURE() << path << ": unexpected line: " << line;
      return {};
    }
    const Case& c = cases[digests.size()];
    const std::string key = absl::StrCat(c.n, " ", c.world, " ", c.rank, " ", c.epoch, " ",
                                         c.drop_last ? 1 : 0, " ", c.shuffle ? 1 : 0, " ", c.seed);
    if (line.substr(0, colon) != key) {
      ADD_FAILURE() << path << " lists case [" << line.substr(0, colon)
                    << "] where GoldenCases() has [" << key
                    << "]: regenerate it with make_sampler_golden.py";
      return {};
    }
    digests.push_back(line.substr(colon + 3));
  }
  EXPECT_EQ(digests.size(), cases.size()) << path;
  return digests;
}

// Against torch itself when a Python torch is configured, and always against the checked-in
// digests of torch's output, so the test runs (and never skips) without one.
TEST(SamplerPlanTest, MatchesTorchDistributedSamplerBitExactly) {
  const std::vector<Case> cases = GoldenCases();
  const std::vector<std::string> checked_in = CheckedInGolden(cases);
  ASSERT_EQ(checked_in.size(), cases.size());
  std::string why;
  const std::vector<std::vector<int64_t>> live = TorchGolden(cases, &why);
  if (live.empty()) {
    std::printf(
        "note: no live torch to compare with (%s); comparing with the checked-in golden "
        "vectors only\n",
        why.c_str());
  } else {
    ASSERT_EQ(live.size(), cases.size());
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    SCOPED_TRACE(absl::StrCat("n=", c.n, " world=", c.world, " rank=", c.rank, " epoch=", c.epoch,
                              " drop_last=", c.drop_last, " shuffle=", c.shuffle,
                              " seed=", c.seed));
    const ShardAssignment a = Assign(c);
    const std::vector<int64_t> ours = ShardIndices(a);
    EXPECT_EQ(Digest(ours), checked_in[i]);
    EXPECT_EQ(NumSamplesPerRank(a), static_cast<int64_t>(ours.size()));
    if (!live.empty()) {
      EXPECT_EQ(ours, live[i]);
      EXPECT_EQ(Digest(live[i]), checked_in[i]) << "the checked-in golden vectors are stale";
    }
  }
}

TEST(SamplerPlanTest, RandpermIsAPermutationAndSeedDependent) {
  std::vector<int64_t> a = TorchRandperm(1000, 0);
  std::vector<int64_t> b = TorchRandperm(1000, 1);
  EXPECT_NE(a, b);
  std::sort(a.begin(), a.end());
  for (int64_t i = 0; i < 1000; ++i) EXPECT_EQ(a[static_cast<size_t>(i)], i);
  EXPECT_TRUE(TorchRandperm(0, 0).empty());
  EXPECT_EQ(TorchRandperm(1, 0), std::vector<int64_t>{0});
}

TEST(SamplerPlanTest, ValidationErrors) {
  ShardAssignment a = Assign({10, 2, 0, 0, false, true, 0});
  EXPECT_TRUE(ValidateShardAssignment(a).ok());
  ShardAssignment bad = a;
  bad.rank = 2;
  EXPECT_FALSE(ValidateShardAssignment(bad).ok());
  EXPECT_TRUE(ShardIndices(bad).empty());
  bad = a;
  bad.dataset_size = 0;
  EXPECT_FALSE(ValidateShardAssignment(bad).ok());
  bad = a;
  bad.consumed = 11;
  bad.consumed_world_size = 2;
  EXPECT_FALSE(ValidateShardAssignment(bad).ok());
  bad = a;
  bad.consumed = 4;
  bad.consumed_world_size = 0;
  EXPECT_FALSE(ValidateShardAssignment(bad).ok());
}

TEST(SamplerPlanTest, ResumeWithSameWorldContinuesExactly) {
  for (int64_t n : {100, 101, 1000}) {
    for (int world : {1, 3, 4}) {
      for (bool drop_last : {false, true}) {
        const int64_t batch = 4;
        for (int rank = 0; rank < world; ++rank) {
          ShardAssignment fresh = Assign({n, world, rank, 2, drop_last, true, 7});
          std::vector<int64_t> full = ShardIndices(fresh);
          for (int64_t k = 0; k * batch < static_cast<int64_t>(full.size()); k += 3) {
            ShardAssignment resumed = fresh;
            resumed.consumed = k * batch * world;
            resumed.consumed_world_size = world;
            std::vector<int64_t> want(full.begin() + k * batch, full.end());
            EXPECT_EQ(ShardIndices(resumed), want) << "n=" << n << " W=" << world << " k=" << k;
          }
        }
      }
    }
  }
}

TEST(SamplerPlanTest, ResplitCoversTheRemainderEvenly) {
  for (int64_t n : {97, 100, 1000}) {
    for (int w0 : {2, 4, 8}) {
      for (int w1 : {1, 3, 4, 6}) {
        for (bool drop_last : {false, true}) {
          ShardAssignment base = Assign({n, w0, 0, 1, drop_last, true, 3});
          std::vector<int64_t> g = GlobalOrder(base);
          const int64_t consumed = 8 * w0;  // two steps of batch 4
          std::vector<int64_t> remaining(g.begin() + consumed, g.end());
          std::multiset<int64_t> union_of_ranks;
          std::set<size_t> sizes;
          for (int r = 0; r < w1; ++r) {
            ShardAssignment a = base;
            a.world_size = w1;
            a.rank = r;
            a.consumed = consumed;
            a.consumed_world_size = w0;
            std::vector<int64_t> idx = ShardIndices(a);
            sizes.insert(idx.size());
            EXPECT_EQ(static_cast<int64_t>(idx.size()), NumSamplesPerRank(a));
            union_of_ranks.insert(idx.begin(), idx.end());
          }
          EXPECT_EQ(sizes.size(), 1u) << "every rank gets the same count";
          const int64_t rem = static_cast<int64_t>(remaining.size());
          std::multiset<int64_t> want(remaining.begin(), remaining.end());
          if (rem % w1 == 0) {
            EXPECT_EQ(union_of_ranks, want) << "n=" << n << " " << w0 << "->" << w1;
          } else if (drop_last) {
            EXPECT_EQ(static_cast<int64_t>(union_of_ranks.size()), rem / w1 * w1);
          } else {
            // Padded by wrap-around over the remainder: covers every remaining position.
            EXPECT_EQ(static_cast<int64_t>(union_of_ranks.size()), (rem + w1 - 1) / w1 * w1);
            EXPECT_EQ(std::set<int64_t>(union_of_ranks.begin(), union_of_ranks.end()),
                      std::set<int64_t>(want.begin(), want.end()));
          }
        }
      }
    }
  }
}

TEST(SamplerPlanTest, StepsPerEpoch) {
  EXPECT_EQ(StepsPerEpoch(10, 3, false), 4);
  EXPECT_EQ(StepsPerEpoch(10, 3, true), 3);
  EXPECT_EQ(StepsPerEpoch(9, 3, false), 3);
  EXPECT_EQ(StepsPerEpoch(0, 3, false), 0);
  EXPECT_EQ(StepsPerEpoch(5, 0, false), 0);
}

}  // namespace
}  // namespace ddp
