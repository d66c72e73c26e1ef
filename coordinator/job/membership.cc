#include "coordinator/job/membership.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ddp {

Membership::Membership(int world_size, std::string nonce, int64_t generation)
    : world_size_(world_size), nonce_(std::move(nonce)), generation_(generation) {}

absl::StatusOr<Membership::JoinResult> Membership::Join(const WorkerIdentity& who,
                                                        RegisterCallback& done,
                                                        const absl::Status& refusal,
                                                        Completions* out) {
  if (!nonce_.empty() && who.nonce != nonce_) {
    return absl::FailedPreconditionError(
        "nonce mismatch: the dist_file is stale (written by another coordinator start)");
  }
  const auto key = std::make_pair(who.node_rank, who.local_rank);
  auto it = slots_.find(key);
  const bool same_process =
      it != slots_.end() && it->second.who.host == who.host && it->second.who.pid == who.pid;
  if (it != slots_.end() && !same_process) {
    return absl::AlreadyExistsError(absl::StrCat("node ", who.node_rank, " local rank ",
                                                 who.local_rank, " is already registered by ",
                                                 it->second.who.host, " pid ", it->second.who.pid));
  }
  if (!refusal.ok()) return refusal;
  if (same_process) {
    if (world_complete()) {
      // A retry after a lost reply: the same assignment at once.
      out->Add(
          [done = std::move(done), a = Assignment(RankOf(key.first, key.second))] { done(a); });
    } else {
      it->second.waiting.push_back(std::move(done));
    }
    return JoinResult{};
  }
  if (world_complete() || registered() >= world_size_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the world of ", world_size_, " workers is already complete"));
  }
  Slot& slot = slots_[key];
  slot.who = who;
  slot.waiting.push_back(std::move(done));
  JoinResult result;
  result.new_slot = true;
  result.world_full = registered() == world_size_;
  return result;
}

void Membership::Complete(Completions* out) {
  std::set<int> nodes;
  for (const auto& [key, slot] : slots_) nodes.insert(key.first);
  num_nodes_ = static_cast<int>(nodes.size());
  ranks_.reserve(slots_.size());
  for (const auto& [key, slot] : slots_) ranks_.push_back(slot.who);
  complete_.store(true, std::memory_order_release);
  int rank = 0;
  for (auto& [key, slot] : slots_) {
    const RankAssignment a = Assignment(rank++);
    for (RegisterCallback& cb : slot.waiting) out->Add([cb = std::move(cb), a] { cb(a); });
    slot.waiting.clear();
  }
}

void Membership::FailWaiters(const absl::Status& error, Completions* out) {
  for (auto& [key, slot] : slots_) {
    for (RegisterCallback& cb : slot.waiting) out->Add([cb = std::move(cb), error] { cb(error); });
    slot.waiting.clear();
  }
}

std::vector<WorkerIdentity> Membership::Registered() const {
  std::vector<WorkerIdentity> out;
  out.reserve(slots_.size());
  for (const auto& [key, slot] : slots_) out.push_back(slot.who);
  return out;
}

const WorkerIdentity* Membership::Find(int node_rank, int local_rank) const {
  auto it = slots_.find({node_rank, local_rank});
  return it == slots_.end() ? nullptr : &it->second.who;
}

std::string Membership::MissingWorkers() const {
  const int n = registered();
  std::string head = absl::StrCat(n, " of ", world_size_, " workers registered");
  if (slots_.empty()) return absl::StrCat(head, "; no worker contacted the coordinator");
  // Infer the expected layout when every registered worker reports the same local world size.
  std::set<int> lws;
  for (const auto& [key, slot] : slots_) lws.insert(slot.who.local_world_size);
  const int local = *lws.begin();
  if (lws.size() != 1 || world_size_ % local != 0) {
    std::set<int> nodes;
    for (const auto& [key, slot] : slots_) nodes.insert(key.first);
    return absl::StrCat(head, "; ", world_size_ - n,
                        " missing; nodes heard from: ", absl::StrJoin(nodes, ","));
  }
  std::vector<std::string> parts;
  for (int node = 0; node < world_size_ / local; ++node) {
    std::vector<int> missing;
    std::string host;
    for (int l = 0; l < local; ++l) {
      const WorkerIdentity* w = Find(node, l);
      if (w == nullptr) {
        missing.push_back(l);
      } else {
        host = w->host;
      }
    }
    if (missing.empty()) continue;
    parts.push_back(absl::StrCat("node ", node, host.empty() ? "" : absl::StrCat(" (", host, ")"),
                                 missing.size() == 1 ? " local rank " : " local ranks ",
                                 absl::StrJoin(missing, ",")));
  }
  return absl::StrCat(head, "; missing ", absl::StrJoin(parts, "; "));
}

std::string Membership::DescribeWorker(const WorkerIdentity& w) {
  return absl::StrCat("worker (host ", w.host, ", node ", w.node_rank, ", local rank ",
                      w.local_rank, ", pid ", w.pid, ")");
}

int Membership::num_ranks() const { return world_complete() ? static_cast<int>(ranks_.size()) : 0; }

int Membership::RankOf(int node_rank, int local_rank) const {
  const int n = num_ranks();
  for (int r = 0; r < n; ++r) {
    if (who(r).node_rank == node_rank && who(r).local_rank == local_rank) return r;
  }
  return -1;
}

absl::Status Membership::CheckWorker(int rank, int pid) const {
  if (!world_complete()) {
    return absl::FailedPreconditionError("the world is not complete yet: register first");
  }
  const int n = num_ranks();
  if (rank < 0 || rank >= n) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is outside 0..", n - 1));
  }
  if (who(rank).pid != pid) {
    return absl::PermissionDeniedError(
        absl::StrCat("rank ", rank, " is registered to pid ", who(rank).pid, ", not ", pid));
  }
  return absl::OkStatus();
}

RankAssignment Membership::Assignment(int rank) const {
  const WorkerIdentity& w = who(rank);
  return RankAssignment{rank,        world_size_, w.local_rank, w.local_world_size,
                        w.node_rank, num_nodes_,  generation_};
}

std::string Membership::Describe(int rank) const {
  const WorkerIdentity& w = who(rank);
  return absl::StrCat("rank ", rank, " (host ", w.host, ", node ", w.node_rank, ", local rank ",
                      w.local_rank, ", pid ", w.pid, ")");
}

std::vector<std::string> Membership::RankTable() const {
  std::vector<std::string> lines;
  for (int r = 0; r < num_ranks(); ++r) {
    lines.push_back(absl::StrCat("rank ", r, " = node ", who(r).node_rank, " local ",
                                 who(r).local_rank, " (host ", who(r).host, ", pid ", who(r).pid,
                                 ")"));
  }
  return lines;
}

}  // namespace ddp
