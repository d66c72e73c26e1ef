#include "common/sampler_plan.h"

#include <limits>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ddp {
namespace {

int64_t TotalSize(int64_t n, int64_t world, bool drop_last) {
  if (drop_last) return (n / world) * world;
  return ((n + world - 1) / world) * world;
}

}  // namespace

int64_t GlobalSize(const ShardAssignment& a) {
  int w0 = a.consumed > 0 ? a.consumed_world_size : a.world_size;
  return TotalSize(a.dataset_size, w0, a.drop_last);
}

std::vector<int64_t> TorchRandperm(int64_t n, uint64_t seed) {
  std::vector<int64_t> r(static_cast<size_t>(n > 0 ? n : 0));
  // at::mt19937 keeps the low 32 bits of the seed; the engine equals std::mt19937.
  std::mt19937 engine(static_cast<uint32_t>(seed & 0xffffffffu));
  if (n < static_cast<int64_t>(std::numeric_limits<uint32_t>::max() / 20)) {
    for (int64_t i = 0; i < n; ++i) r[static_cast<size_t>(i)] = i;
    for (int64_t i = 0; i < n - 1; ++i) {
      int64_t z = static_cast<int64_t>(engine() % static_cast<uint64_t>(n - i));
      std::swap(r[static_cast<size_t>(i)], r[static_cast<size_t>(z + i)]);
    }
    return r;
  }
  for (int64_t i = 0; i < n; ++i) {
    uint64_t hi = engine();
    uint64_t lo = engine();
    int64_t z = static_cast<int64_t>(((hi << 32) | lo) % static_cast<uint64_t>(i + 1));
    r[static_cast<size_t>(i)] = r[static_cast<size_t>(z)];
    r[static_cast<size_t>(z)] = i;
  }
  return r;
}

absl::Status ValidateShardAssignment(const ShardAssignment& a) {
  if (a.dataset_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset size ", a.dataset_size, " must be > 0"));
  }
  if (a.world_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("world size ", a.world_size, " must be > 0"));
  }
  if (a.rank < 0 || a.rank >= a.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", a.rank, " is outside world size ", a.world_size));
  }
  if (a.epoch < 0) return absl::InvalidArgumentError("epoch must be >= 0");
  if (a.consumed < 0) return absl::InvalidArgumentError("consumed must be >= 0");
  if (a.consumed > 0) {
    if (a.consumed_world_size <= 0) {
      return absl::InvalidArgumentError("consumed_world_size must be > 0 when consumed > 0");
    }
    int64_t g = GlobalSize(a);
    if (a.consumed > g) {
      return absl::InvalidArgumentError(
          absl::StrCat("consumed ", a.consumed, " exceeds the epoch's ", g, " positions"));
    }
  }
  return absl::OkStatus();
}

std::vector<int64_t> GlobalOrder(const ShardAssignment& a) {
  if (!ValidateShardAssignment(a).ok()) return {};
  const int64_t n = a.dataset_size;
  std::vector<int64_t> perm;
  if (a.shuffle) {
    // In uint64: wraps like torch's seed (mod 2^64) for every int64 seed and epoch, where a
    // signed sum could overflow. Equal to seed + epoch whenever that sum fits.
    perm = TorchRandperm(n, static_cast<uint64_t>(a.seed) + static_cast<uint64_t>(a.epoch));
  } else {
    perm.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) perm[static_cast<size_t>(i)] = i;
  }
  const int64_t total = GlobalSize(a);
  std::vector<int64_t> g(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) g[static_cast<size_t>(i)] = perm[static_cast<size_t>(i % n)];
  return g;
}

int64_t NumSamplesPerRank(const ShardAssignment& a) {
  if (!ValidateShardAssignment(a).ok()) return 0;
  const int64_t remaining = GlobalSize(a) - a.consumed;
  return TotalSize(remaining, a.world_size, a.drop_last) / a.world_size;
}

std::vector<int64_t> ShardIndices(const ShardAssignment& a) {
  if (!ValidateShardAssignment(a).ok()) return {};
  std::vector<int64_t> g = GlobalOrder(a);
  const int64_t remaining = static_cast<int64_t>(g.size()) - a.consumed;
  const int64_t per_rank = NumSamplesPerRank(a);
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(per_rank));
  for (int64_t i = 0; i < per_rank; ++i) {
    int64_t j = a.rank + static_cast<int64_t>(a.world_size) * i;  // position within R
    out.push_back(g[static_cast<size_t>(a.consumed + j % remaining)]);
  }
  return out;
}

int64_t StepsPerEpoch(int64_t num_samples, int64_t batch_size, bool loader_drop_last) {
  if (batch_size <= 0 || num_samples <= 0) return 0;
  return loader_drop_last ? num_samples / batch_size : (num_samples + batch_size - 1) / batch_size;
}

}  // namespace ddp
