// torch.randperm switches algorithm at n >= UINT32_MAX / 20 (214748364): below it, a
// Fisher-Yates shuffle with 32-bit draws; from it on, an "inside-out" shuffle with 64-bit draws
// made of two 32-bit ones. The golden vectors in sampler_plan_test stay far below that size, so
// this test checks TorchRandperm at the boundary against torch itself. The permutation is 1.7 GB,
// so both sides reduce it to a position-weighted checksum (sum of perm[i] * (i + 1) mod 2^64,
// which any misplaced element changes) plus its first and last values. Python runs concurrently
// with the C++ side; about a minute in all. Without a Python torch the test still runs, against
// torch's summary checked in below (kTorchSummary).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/sampler_plan.h"
#include "gtest/gtest.h"
#include "tests/testing/sanitizers.h"

namespace ddp {
namespace {

constexpr int64_t kBoundary = 214748364;  // UINT32_MAX / 20: the first n of the 64-bit branch
constexpr uint64_t kSeed = 20261130;
constexpr int kEnds = 4;
// Sanitizer builds: the permutation is 1.7 GB of single-threaded arithmetic, minutes under ASan
// and about 7 GB of shadow memory under TSan; the regular build runs it.
using ::ddp::testing::kUnderSanitizer;
// What torch 2.11.0 prints for randperm(kBoundary, seed kSeed): checksum, first and last kEnds.
constexpr char kTorchSummary[] =
    "17784052965589096123 148098920 99240427 147135524 70594895 35639579 98823480 162633936 "
    "181182745";

std::string Summary(const std::vector<int64_t>& perm) {
  uint64_t sum = 0;
  for (size_t i = 0; i < perm.size(); ++i) {
    sum += static_cast<uint64_t>(perm[i]) * static_cast<uint64_t>(i + 1);
  }
  std::string out = absl::StrCat(sum);
  for (int i = 0; i < kEnds; ++i) absl::StrAppend(&out, " ", perm[static_cast<size_t>(i)]);
  for (int i = kEnds; i > 0; --i) absl::StrAppend(&out, " ", perm[perm.size() - i]);
  return out;
}

TEST(SamplerLargeNTest, TorchRandpermMatchesTorchAtTheSixtyFourBitBoundary) {
  if (kUnderSanitizer) {
    GTEST_SKIP() << "a 1.7 GB single-threaded permutation takes minutes under ASan and about 7 GB "
                    "of shadow memory under TSan; the regular build runs it";
  }
  const char* py = std::getenv("DDP_TORCH_PYTHON");
  const bool live = py != nullptr && *py != '\0';
  const std::string script =
      ::testing::TempDir() + "/randperm_large_" + std::to_string(::getpid()) + ".py";
  FILE* pipe = nullptr;
  if (live) {
    std::ofstream out(script);
    out << "import sys\ntry:\n  import numpy as np, torch\nexcept Exception as e:\n"
           "  print('NOTORCH', e); sys.exit(0)\n"
        << "n, seed, k = " << kBoundary << ", " << kSeed << ", " << kEnds << "\n"
        << "p = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).numpy()\n"
           "u = p.view(np.uint64)\ns = 0\n"
           "for a in range(0, n, 1 << 24):\n"
           "  b = min(n, a + (1 << 24))\n"
           "  s = (s + int((u[a:b] * np.arange(a + 1, b + 1, dtype=np.uint64)).sum())) % (1 << "
           "64)\n"
           "print(' '.join(map(str, [s] + p[:k].tolist() + p[-k:].tolist())))\n";
    out.close();
    // Start torch first, then compute ours while it runs.
    pipe = ::popen(absl::StrCat("'", py, "' '", script, "' 2>&1").c_str(), "r");
    ASSERT_NE(pipe, nullptr);
  }
  std::string ours;
  {
    const std::vector<int64_t> perm = TorchRandperm(kBoundary, kSeed);
    ASSERT_EQ(static_cast<int64_t>(perm.size()), kBoundary);
    ours = Summary(perm);
  }
  EXPECT_EQ(ours, kTorchSummary) << "checksum, first and last " << kEnds << " values of randperm("
                                 << kBoundary << ", seed " << kSeed
                                 << ") against torch's, checked in";
  if (!live) {
    std::printf(
        "note: DDP_TORCH_PYTHON is empty; compared with the checked-in torch summary only\n");
    return;
  }
  std::string text;
  char buf[4096];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof(buf), pipe)) > 0) text.append(buf, got);
  const int rc = ::pclose(pipe);
  std::remove(script.c_str());
  if (text.rfind("NOTORCH", 0) == 0) {
    std::printf("note: %s cannot import torch (%s); compared with the checked-in summary only\n",
                py, text.c_str());
    return;
  }
  ASSERT_EQ(rc, 0) << text;
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  EXPECT_EQ(ours, text) << "checksum, first and last " << kEnds << " values of randperm("
                        << kBoundary << ", seed " << kSeed << ") against live torch";
  EXPECT_EQ(text, kTorchSummary) << "the checked-in summary is stale for this torch";
}

}  // namespace
}  // namespace ddp
