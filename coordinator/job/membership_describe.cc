// Membership's descriptions, for events and failure texts: ranks, workers and nodes, who is
// missing from a registration or from the generation being formed, and the rank table for the
// log. Same class and thread contract as membership.cc.
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/job/membership.h"

namespace ddp {

std::string Membership::DescribeNode(int node_rank) const {
  std::string host;
  std::vector<int> ranks;
  for (const auto& [key, slot] : slots_) {
    if (key.first != node_rank) continue;
    if (host.empty()) host = slot.who.host;
    const int rank = RankOf(key.first, key.second);
    if (rank >= 0) ranks.push_back(rank);
  }
  return absl::StrCat("node ", node_rank, " (host ", host.empty() ? "?" : host,
                      ranks.size() == 1 ? ", rank " : ", ranks ", absl::StrJoin(ranks, ","), ")");
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
      if (w == nullptr || vacant(node, l)) {
        missing.push_back(l);
      }
      if (w != nullptr) host = w->host;
    }
    if (missing.empty()) continue;
    parts.push_back(absl::StrCat("node ", node, host.empty() ? "" : absl::StrCat(" (", host, ")"),
                                 missing.size() == 1 ? " local rank " : " local ranks ",
                                 absl::StrJoin(missing, ",")));
  }
  // A large job's list is cut (a reason is one line of at most a few KiB): the first nodes, then
  // how many more.
  constexpr size_t kMaxListed = 32;
  std::string more;
  if (parts.size() > kMaxListed) {
    more = absl::StrCat("; and ", parts.size() - kMaxListed, " more nodes");
    parts.resize(kMaxListed);
  }
  return absl::StrCat(head, "; missing ", absl::StrJoin(parts, "; "), more);
}

std::string Membership::MissingMembers() const {
  std::vector<std::string> parts;
  int rank = 0;
  for (const auto& [key, slot] : slots_) {
    const std::string where =
        absl::StrCat("rank ", rank++, " (node ", key.first, " local rank ", key.second, ", ");
    if (slot.vacant) {
      parts.push_back(absl::StrCat(where, "replacement not registered",
                                   slot.fate.empty() ? "" : "; ", slot.fate, ")"));
    } else if (slot.joined != forming_) {
      parts.push_back(absl::StrCat(where, "pid ", slot.who.pid, " did not rejoin)"));
    }
  }
  return parts.empty() ? "nobody missing" : absl::StrJoin(parts, "; ");
}

std::string Membership::DescribeWorker(const WorkerIdentity& w) {
  return absl::StrCat("worker (host ", w.host, ", node ", w.node_rank, ", local rank ",
                      w.local_rank, ", pid ", w.pid, ")");
}

std::string Membership::DescribeIn(const RankTable& t, int rank) {
  const WorkerIdentity& w = t.ranks[static_cast<size_t>(rank)];
  return absl::StrCat("rank ", rank, " (host ", w.host, ", node ", w.node_rank, ", local rank ",
                      w.local_rank, ", pid ", w.pid, ")");
}

std::string Membership::Describe(int rank) const { return DescribeIn(*table(), rank); }

std::vector<std::string> Membership::RankTableLines() const {
  std::vector<std::string> lines;
  const std::shared_ptr<const RankTable> t = table();
  if (t == nullptr) return lines;
  for (int r = 0; r < t->size(); ++r) {
    const WorkerIdentity& w = t->ranks[static_cast<size_t>(r)];
    lines.push_back(absl::StrCat("rank ", r, " = node ", w.node_rank, " local ", w.local_rank,
                                 " (host ", w.host, ", pid ", w.pid, ")"));
  }
  return lines;
}

}  // namespace ddp
