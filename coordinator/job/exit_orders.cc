#include "coordinator/job/exit_orders.h"

namespace ddp {

bool ExitOrders::Order(int rank, int pid, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  const auto it = orders_.find(rank);
  if (it != orders_.end() && it->second.pid == pid) return false;
  orders_[rank] = Entry{pid, reason};
  pending_.store(static_cast<int>(orders_.size()), std::memory_order_release);
  return true;
}

std::optional<std::string> ExitOrders::For(int rank, int pid) const {
  if (pending() == 0) return std::nullopt;
  absl::ReaderMutexLock lock(&mu_);
  const auto it = orders_.find(rank);
  if (it == orders_.end() || it->second.pid != pid) return std::nullopt;
  return it->second.reason;
}

void ExitOrders::Clear() {
  absl::MutexLock lock(&mu_);
  orders_.clear();
  pending_.store(0, std::memory_order_release);
}

}  // namespace ddp
