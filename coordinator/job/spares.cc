#include "coordinator/job/spares.h"

namespace ddp {

const Spares::Spare& Spares::Seen(const SpareReport& report, absl::Time now, bool* first) {
  Spare& s = spares_[report.node_rank];
  const bool is_new = s.report.pid != report.pid || s.report.host != report.host;
  if (first != nullptr) *first = is_new;
  if (is_new) {
    // A new process on that node (or the first call): whatever the old one was given is its own.
    s = Spare{};
  }
  s.report = report;
  s.last_seen = now;
  return s;
}

const Spares::Spare* Spares::Assign(int node, int local_world_size, absl::Time now) {
  Spare* best = nullptr;
  for (auto& [id, s] : spares_) {
    if (!Available(s, now) || s.report.local_world_size != local_world_size) continue;
    if (best == nullptr || s.last_seen > best->last_seen) best = &s;
  }
  if (best != nullptr) best->taking_over = node;
  return best;
}

bool Spares::CanAssign(int local_world_size, absl::Time now) const {
  for (const auto& [id, s] : spares_) {
    if (Available(s, now) && s.report.local_world_size == local_world_size) return true;
  }
  return false;
}

bool Spares::TakingOver(int node) const {
  for (const auto& [id, s] : spares_) {
    if (s.taking_over == node && !s.settled) return true;
  }
  return false;
}

void Spares::Settle() {
  for (auto& [id, s] : spares_) {
    if (s.taking_over >= 0) s.settled = true;
  }
}

int Spares::Standing(absl::Time now) const {
  int n = 0;
  for (const auto& [id, s] : spares_) n += Available(s, now) ? 1 : 0;
  return n;
}

}  // namespace ddp
