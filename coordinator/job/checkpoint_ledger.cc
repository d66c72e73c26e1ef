#include "coordinator/job/checkpoint_ledger.h"

#include "absl/strings/str_cat.h"

namespace ddp {

absl::Status CheckpointLedger::Commit(const CommittedCheckpoint& c) {
  if (latest_ &&
      (c.epoch < latest_->epoch || (c.epoch == latest_->epoch && c.step < latest_->step))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint at epoch ", c.epoch, " step ", c.step,
        " is older than the committed one (epoch ", latest_->epoch, " step ", latest_->step, ")"));
  }
  latest_ = c;
  return absl::OkStatus();
}

std::optional<int64_t> CheckpointLedger::ConsumedIn(int64_t epoch) const {
  if (!latest_ || latest_->epoch != epoch) return std::nullopt;
  return latest_->consumed;
}

}  // namespace ddp
