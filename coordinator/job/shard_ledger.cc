#include "coordinator/job/shard_ledger.h"

#include "absl/strings/str_cat.h"
#include "common/sampler_plan.h"

namespace ddp {
namespace {

// Everything but the epoch.
bool SameParameters(const ShardRequest& a, ShardRequest b) {
  b.epoch = a.epoch;
  return a == b;
}

}  // namespace

ShardLedger::ShardLedger(int world_size)
    : world_size_(world_size), last_epoch_(static_cast<size_t>(world_size), -1) {}

void ShardLedger::Reset(int world_size) {
  agreed_.clear();
  world_size_ = world_size;
  last_epoch_.assign(static_cast<size_t>(world_size), -1);
}

absl::StatusOr<ShardAssignment> ShardLedger::Assign(int rank, const ShardRequest& request,
                                                    std::optional<int64_t> checkpoint_consumed) {
  int64_t& last = last_epoch_[static_cast<size_t>(rank)];
  if (request.epoch < last) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " asked for epoch ",
                                                   request.epoch, " after epoch ", last,
                                                   " (epochs go forward)"));
  }
  auto [it, inserted] = agreed_.emplace(request.epoch, request);
  const ShardRequest& agreed = it->second;
  if (!inserted && !SameParameters(agreed, request)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank, " disagrees with the other ranks on epoch ", request.epoch,
        " (dataset_size ", request.dataset_size, " vs ", agreed.dataset_size, ", seed ",
        request.seed, " vs ", agreed.seed, ", shuffle/drop_last/resume must match)"));
  }
  ShardAssignment a;
  a.epoch = request.epoch;
  a.dataset_size = request.dataset_size;
  a.seed = request.seed;
  a.shuffle = request.shuffle;
  a.drop_last = request.drop_last;
  a.world_size = world_size_;
  a.rank = rank;
  a.consumed_world_size = world_size_;
  if (checkpoint_consumed) {
    a.consumed = *checkpoint_consumed;
  } else if (request.resume_consumed > 0) {
    a.consumed = request.resume_consumed;
    a.consumed_world_size = request.resume_world_size;
  }
  absl::Status valid = ValidateShardAssignment(a);
  if (!valid.ok()) return absl::InvalidArgumentError(valid.message());
  last = request.epoch;
  return a;
}

}  // namespace ddp
