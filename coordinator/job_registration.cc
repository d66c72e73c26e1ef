// Job, part 2: registration -- joining the world, deterministic ranks once it is complete, and
// the description of who is still missing. (job.cc has the rest of the state machine.)
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/job.h"
#include "coordinator/validation.h"

namespace ddp {

std::string Job::MissingWorkersLocked() const {
  const int registered = static_cast<int>(slots_.size());
  std::string head = absl::StrCat(registered, " of ", config_.world_size, " workers registered");
  if (slots_.empty()) return absl::StrCat(head, "; no worker contacted the coordinator");
  // Infer the expected layout when every registered worker reports the same local world size.
  std::set<int> lws;
  for (const auto& [key, slot] : slots_) lws.insert(slot.who.local_world_size);
  const int local = *lws.begin();
  if (lws.size() != 1 || config_.world_size % local != 0) {
    std::set<int> nodes;
    for (const auto& [key, slot] : slots_) nodes.insert(key.first);
    return absl::StrCat(head, "; ", config_.world_size - registered,
                        " missing; nodes heard from: ", absl::StrJoin(nodes, ","));
  }
  std::vector<std::string> parts;
  const int num_nodes = config_.world_size / local;
  for (int node = 0; node < num_nodes; ++node) {
    std::vector<int> missing;
    std::string host;
    for (int l = 0; l < local; ++l) {
      auto it = slots_.find({node, l});
      if (it == slots_.end()) {
        missing.push_back(l);
      } else {
        host = it->second.who.host;
      }
    }
    if (missing.empty()) continue;
    parts.push_back(absl::StrCat("node ", node, host.empty() ? "" : absl::StrCat(" (", host, ")"),
                                 missing.size() == 1 ? " local rank " : " local ranks ",
                                 absl::StrJoin(missing, ",")));
  }
  return absl::StrCat(head, "; missing ", absl::StrJoin(parts, "; "));
}

void Job::Register(const WorkerIdentity& who, RegisterCallback done) {
  std::vector<Completion> out;
  absl::Status error = ValidateIdentity(who, config_.world_size);
  {
    absl::MutexLock lock(&mu_);
    if (error.ok() && !config_.nonce.empty() && who.nonce != config_.nonce) {
      error = absl::FailedPreconditionError(
          "nonce mismatch: the dist_file is stale (written by another coordinator start)");
    }
    auto key = std::make_pair(who.node_rank, who.local_rank);
    auto it = slots_.find(key);
    const bool same_process =
        it != slots_.end() && it->second.who.host == who.host && it->second.who.pid == who.pid;
    if (!error.ok()) {
      // fall through to reply with the error
    } else if (it != slots_.end() && !same_process) {
      error = absl::AlreadyExistsError(absl::StrCat(
          "node ", who.node_rank, " local rank ", who.local_rank, " is already registered by ",
          it->second.who.host, " pid ", it->second.who.pid));
    } else if (state_ == JobState::kFailed) {
      error = absl::AbortedError(absl::StrCat("job failed: ", failure_reason_));
    } else if (same_process && state_ != JobState::kRegistering) {
      for (int r = 0; r < num_ranks_; ++r) {
        const WorkerIdentity& w = ranks_[static_cast<size_t>(r)].who;
        if (w.node_rank == who.node_rank && w.local_rank == who.local_rank) {
          RankAssignment a{r,           config_.world_size, w.local_rank,      w.local_world_size,
                           w.node_rank, num_nodes_,         config_.generation};
          out.push_back([done = std::move(done), a] { done(a); });
          break;
        }
      }
    } else if (same_process) {
      it->second.waiting.push_back(std::move(done));
    } else if (state_ != JobState::kRegistering ||
               static_cast<int>(slots_.size()) >= config_.world_size) {
      error = absl::ResourceExhaustedError(
          absl::StrCat("the world of ", config_.world_size, " workers is already complete"));
    } else {
      Slot& slot = slots_[key];
      slot.who = who;
      slot.waiting.push_back(std::move(done));
      EventLocked(absl::StrCat("registered ", who.host, " pid ", who.pid, " node ", who.node_rank,
                               " local rank ", who.local_rank, " (", slots_.size(), " of ",
                               config_.world_size, ")"),
                  &out);
      if (static_cast<int>(slots_.size()) == config_.world_size) CompleteRegistrationLocked(&out);
    }
  }
  if (!error.ok()) done(error);
  Run(out);
}

void Job::CompleteRegistrationLocked(std::vector<Completion>* out) {
  const absl::Time now = clock_->Now();
  std::set<int> nodes;
  for (const auto& [key, slot] : slots_) nodes.insert(key.first);
  num_nodes_ = static_cast<int>(nodes.size());
  auto ranks = std::make_unique<RankSlot[]>(slots_.size());
  int rank = 0;
  for (auto& [key, slot] : slots_) {
    RankSlot& r = ranks[static_cast<size_t>(rank)];
    r.who = slot.who;
    {
      absl::MutexLock slot_lock(&r.mu);
      r.last_seen = now;
    }
    RankAssignment a{rank,
                     config_.world_size,
                     slot.who.local_rank,
                     slot.who.local_world_size,
                     slot.who.node_rank,
                     num_nodes_,
                     config_.generation};
    for (RegisterCallback& cb : slot.waiting) {
      out->push_back([cb = std::move(cb), a] { cb(a); });
    }
    slot.waiting.clear();
    ++rank;
  }
  // The rank table goes to the log only (one line per rank), not into the bounded event list.
  if (config_.log) {
    int r = 0;
    for (const auto& [key, slot] : slots_) {
      out->push_back(
          [log = config_.log, line = absl::StrCat("rank ", r++, " = node ", key.first, " local ",
                                                  key.second, " (host ", slot.who.host, ", pid ",
                                                  slot.who.pid, ")")] { log(line); });
    }
  }
  ranks_ = std::move(ranks);
  num_ranks_ = rank;
  world_complete_.store(true, std::memory_order_release);
  running_since_ = now;
  SetStateLocked(JobState::kRunning,
                 absl::StrCat("all ", config_.world_size, " workers registered on ", num_nodes_,
                              " node(s) after ", SecondsText(now - start_)),
                 out);
}

}  // namespace ddp
