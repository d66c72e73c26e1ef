// PyTorch DistributedSampler math without torch: which dataset indices, in which order, a rank
// reads in an epoch, plus the rule for resuming (and re-splitting) a partly consumed epoch.
//
// Fresh epoch (consumed == 0), identical to DistributedSampler(n, W, rank, shuffle, seed,
// drop_last) with set_epoch(epoch):
//   perm  = torch.randperm(n, generator=manual_seed(seed + epoch)) if shuffle else 0..n-1
//   total = ceil(n / W) * W, or floor(n / W) * W with drop_last
//   G     = perm padded by wrap-around to `total` (perm[i % n]), or truncated to `total`
//   rank r reads G[r], G[r + W], G[r + 2W], ...
// torch's generator is mt19937 seeded with (seed + epoch) mod 2^32; randperm swaps
// r[i] <-> r[i + random() % (n - i)] for i < n - 1 (n < 2^32/20), and for larger n runs the
// "inside-out" shuffle with random64() % (i + 1). Both are reproduced bit-exactly.
//
// RESUME / RE-SPLIT RULE. DistributedSampler + DataLoader(batch B) hands rank r the positions
// r, r+W, r+2W, ... of G, so after k steps with world W exactly the first consumed = k*B*W
// positions of G are consumed (a checkpoint records `consumed` and W0 = consumed_world_size).
// G is always built with W0 (it fixes the padding). The remainder R = G[consumed:] is split
// strided among the new world W': rank r gets R[r], R[r + W'], ... With W' == W0 this continues
// exactly the uninterrupted sequence. When |R| is not a multiple of W', R is padded by
// wrap-around over R itself (R[j % |R|]) to ceil(|R| / W') * W' so every rank gets the same
// count — or truncated to floor(|R| / W') * W' when drop_last — as DistributedSampler does.
//
// Thread safety: pure functions; safe from any thread.
#ifndef SLURM_DDP_COMMON_SAMPLER_PLAN_H_
#define SLURM_DDP_COMMON_SAMPLER_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/coordinator_api.h"

namespace ddp {

// torch.randperm(n, generator=torch.Generator().manual_seed(seed)).
std::vector<int64_t> TorchRandperm(int64_t n, uint64_t seed);

// Validates an assignment (sizes, ranks, consumed in range); one-line errors.
absl::Status ValidateShardAssignment(const ShardAssignment& a);

// The epoch's padded global order G (built with the consumed world size when consumed > 0).
std::vector<int64_t> GlobalOrder(const ShardAssignment& a);
// len(GlobalOrder(a)) without building it.
int64_t GlobalSize(const ShardAssignment& a);

// The indices rank `a.rank` reads for the rest of epoch `a.epoch`, in order. Empty when the
// assignment is invalid (call ValidateShardAssignment first to learn why).
std::vector<int64_t> ShardIndices(const ShardAssignment& a);

// len(ShardIndices(a)) without building it.
int64_t NumSamplesPerRank(const ShardAssignment& a);

// Batches the DataLoader(batch_size, drop_last) yields over `num_samples` samples.
int64_t StepsPerEpoch(int64_t num_samples, int64_t batch_size, bool loader_drop_last);

}  // namespace ddp

#endif  // SLURM_DDP_COMMON_SAMPLER_PLAN_H_
