#include "coordinator/job/membership.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ddp {

Membership::Membership(int world_size, std::string nonce, int64_t slurm_generation)
    : world_size_(world_size), nonce_(std::move(nonce)), slurm_generation_(slurm_generation) {}

absl::StatusOr<Membership::JoinResult> Membership::Join(const WorkerIdentity& who,
                                                        RegisterCallback& done,
                                                        const absl::Status& refusal,
                                                        Completions* out) {
  if (!nonce_.empty() && who.nonce != nonce_) {
    return absl::FailedPreconditionError(
        "nonce mismatch: the dist_file is stale (written by another coordinator start)");
  }
  const Key key(who.node_rank, who.local_rank);
  auto it = slots_.find(key);
  const bool same_process =
      it != slots_.end() && it->second.who.host == who.host && it->second.who.pid == who.pid;
  const bool replacing = it != slots_.end() && it->second.vacant && !same_process;
  if (it != slots_.end() && !same_process && !(replacing && forming_next())) {
    return absl::AlreadyExistsError(absl::StrCat("node ", who.node_rank, " local rank ",
                                                 who.local_rank, " is already registered by ",
                                                 it->second.who.host, " pid ", it->second.who.pid));
  }
  if (!refusal.ok()) return refusal;
  if (replacing) RETURN_IF_ERROR(CheckNotDead(it->second, who.pid, "registration"));
  if (same_process) {
    Slot& slot = it->second;
    if (slot.vacant) {
      return absl::FailedPreconditionError(
          absl::StrCat("node ", who.node_rank, " local rank ", who.local_rank, " pid ", who.pid,
                       " was lost; a new process must take its place"));
    }
    if (slot.joined == current_ && !forming_next()) {
      // A retry after a lost reply: the same assignment at once.
      const std::shared_ptr<const RankTable> t = table();
      out->Add([done = std::move(done),
                a = AssignmentIn(*t, RankOf(key.first, key.second), {}, false)] { done(a); });
    } else {
      slot.waiting.push_back(std::move(done));
    }
    return JoinResult{};
  }
  if (replacing) {
    Slot& slot = it->second;
    slot.who = who;
    Set(slot, /*vacant=*/false, forming_);
    slot.committed_step = -1;
    slot.waiting.push_back(std::move(done));
    return JoinResult{true, GenerationComplete()};
  }
  if (world_complete() || registered() >= world_size_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the world of ", world_size_, " workers is already complete"));
  }
  Slot& slot = slots_[key];
  slot.who = who;
  Set(slot, /*vacant=*/false, forming_);
  slot.waiting.push_back(std::move(done));
  return JoinResult{true, GenerationComplete()};
}

absl::StatusOr<bool> Membership::Rejoin(int rank, int64_t committed_step, RegisterCallback& done) {
  const std::shared_ptr<const RankTable> t = table();
  if (t == nullptr || rank < 0 || rank >= t->size()) {
    return absl::FailedPreconditionError("no rank table to rejoin from");
  }
  const WorkerIdentity& w = t->ranks[static_cast<size_t>(rank)];
  auto it = slots_.find(Key(w.node_rank, w.local_rank));
  if (it == slots_.end()) {
    // It was silent with the rest of its node, which the job dropped (shrinking): too late.
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", rank, " (node ", w.node_rank, ") was dropped: the job went on without its node"));
  }
  Slot& slot = it->second;
  if (slot.who.pid != w.pid) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", rank, " (pid ", w.pid, ") was replaced by pid ", slot.who.pid));
  }
  RETURN_IF_ERROR(CheckNotDead(slot, w.pid, "rejoin"));
  // The member was declared lost (silent) but is alive: it may take its slot back until a
  // replacement does.
  Set(slot, /*vacant=*/false, current_ + 1);
  slot.committed_step = committed_step;
  slot.waiting.push_back(std::move(done));
  return forming_next() && GenerationComplete();
}

void Membership::BeginNext() {
  if (forming_next()) return;
  forming_ = current_ + 1;
  Recount();
}

void Membership::Set(Slot& slot, bool vacant, int64_t joined) {
  if (slot.vacant) --vacant_;
  if (Ready(slot)) --ready_;
  slot.vacant = vacant;
  slot.joined = joined;
  if (slot.vacant) ++vacant_;
  if (Ready(slot)) ++ready_;
}

void Membership::Recount() {
  vacant_ = 0;
  ready_ = 0;
  for (const auto& [key, slot] : slots_) {
    if (slot.vacant) ++vacant_;
    if (Ready(slot)) ++ready_;
  }
}

void Membership::Vacate(int rank, const std::string& fate, const absl::Status& error,
                        Completions* out) {
  const std::shared_ptr<const RankTable> t = table();
  if (t == nullptr || rank < 0 || rank >= t->size()) return;
  const WorkerIdentity& w = t->ranks[static_cast<size_t>(rank)];
  auto it = slots_.find(Key(w.node_rank, w.local_rank));
  if (it == slots_.end()) return;
  Slot& slot = it->second;
  Set(slot, /*vacant=*/true, -1);
  slot.vacated = true;
  slot.fate = fate;
  for (RegisterCallback& cb : slot.waiting) out->Add([cb = std::move(cb), error] { cb(error); });
  slot.waiting.clear();
}

void Membership::NoteFailedStart(int node_rank, int local_rank, const std::string& fate) {
  auto it = slots_.find(Key(node_rank, local_rank));
  if (it != slots_.end() && it->second.vacant) it->second.fate = absl::StrCat("its start ", fate);
}

void Membership::NoteDead(int node_rank, int local_rank, int pid) {
  auto it = slots_.find(Key(node_rank, local_rank));
  if (it == slots_.end()) return;
  std::vector<int>& dead = it->second.dead_pids;
  if (std::find(dead.begin(), dead.end(), pid) == dead.end()) dead.push_back(pid);
}

absl::Status Membership::CheckNotDead(const Slot& slot, int pid, const char* call) {
  if (std::find(slot.dead_pids.begin(), slot.dead_pids.end(), pid) == slot.dead_pids.end()) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      absl::StrCat("node ", slot.who.node_rank, " local rank ", slot.who.local_rank, " pid ", pid,
                   " was reported dead by its node's task; its ", call,
                   " came after (it was on its way when the process died)"));
}

bool Membership::GenerationComplete() const {
  return static_cast<int>(slots_.size()) == world_size_ && ready_ == world_size_;
}

std::vector<int> Membership::Complete(const GenerationNote& note, Completions* out) {
  auto t = std::make_shared<RankTable>();
  t->generation = forming_;
  t->store_prefix = absl::StrCat("gen", slurm_generation_, "/m", forming_);
  std::set<int> nodes;
  bool state_from_peers = false;
  std::vector<int> revived;
  for (const auto& [key, slot] : slots_) {
    nodes.insert(key.first);
    if (slot.committed_step >= 0) state_from_peers = true;
    if (slot.vacated) revived.push_back(t->size());
    t->ranks.push_back(slot.who);
  }
  t->num_nodes = static_cast<int>(nodes.size());
  num_nodes_ = t->num_nodes;
  current_ = forming_;
  {
    absl::MutexLock lock(&table_mu_);
    table_ = t;
  }
  complete_.store(true, std::memory_order_release);
  int rank = 0;
  for (auto& [key, slot] : slots_) {
    const RankAssignment a = AssignmentIn(*t, rank++, note, state_from_peers);
    for (RegisterCallback& cb : slot.waiting) out->Add([cb = std::move(cb), a] { cb(a); });
    slot.waiting.clear();
    slot.vacated = false;
    slot.committed_step = -1;
    slot.fate.clear();
    slot.dead_pids.clear();
  }
  return revived;
}

void Membership::Restore(const RankTable& table) {
  slots_.clear();
  for (const WorkerIdentity& who : table.ranks) {
    Slot& slot = slots_[{who.node_rank, who.local_rank}];
    slot.who = who;
    slot.joined = table.generation;
  }
  num_nodes_ = table.num_nodes;
  world_size_ = table.size();
  current_ = table.generation;
  forming_ = table.generation;
  Recount();
  {
    absl::MutexLock lock(&table_mu_);
    table_ = std::make_shared<RankTable>(table);
  }
  complete_.store(true, std::memory_order_release);
}

void Membership::FailWaiters(const absl::Status& error, Completions* out) {
  for (auto& [key, slot] : slots_) {
    for (RegisterCallback& cb : slot.waiting) out->Add([cb = std::move(cb), error] { cb(error); });
    slot.waiting.clear();
  }
}

int Membership::registered() const { return static_cast<int>(slots_.size()) - vacant_; }

std::vector<WorkerIdentity> Membership::Registered() const {
  std::vector<WorkerIdentity> out;
  out.reserve(slots_.size());
  for (const auto& [key, slot] : slots_) {
    if (!slot.vacant) out.push_back(slot.who);
  }
  return out;
}

const WorkerIdentity* Membership::Find(int node_rank, int local_rank) const {
  auto it = slots_.find(Key(node_rank, local_rank));
  return it == slots_.end() ? nullptr : &it->second.who;
}

bool Membership::vacant(int node_rank, int local_rank) const {
  auto it = slots_.find(Key(node_rank, local_rank));
  return it != slots_.end() && it->second.vacant;
}

int Membership::NodesInSlots() const {
  std::set<int> nodes;
  for (const auto& [key, slot] : slots_) nodes.insert(key.first);
  return static_cast<int>(nodes.size());
}

int Membership::RemoveNode(int node_rank) {
  int removed = 0;
  for (auto it = slots_.begin(); it != slots_.end();) {
    if (it->first.first == node_rank) {
      if (it->second.vacant) --vacant_;
      if (Ready(it->second)) --ready_;
      it = slots_.erase(it);
      ++removed;
    } else {
      ++it;
    }
  }
  world_size_ -= removed;
  return removed;
}

int Membership::SlotsOnNode(int node_rank) const {
  int n = 0;
  for (const auto& [key, slot] : slots_) n += key.first == node_rank ? 1 : 0;
  return n;
}

std::vector<int> Membership::VacantNodes() const {
  std::map<int, bool> all_vacant;  // node -> every slot so far vacant
  for (const auto& [key, slot] : slots_) {
    auto [it, inserted] = all_vacant.emplace(key.first, slot.vacant);
    if (!inserted) it->second = it->second && slot.vacant;
  }
  std::vector<int> out;
  for (const auto& [node, vacant] : all_vacant) {
    if (vacant) out.push_back(node);
  }
  return out;
}

std::shared_ptr<const RankTable> Membership::table() const {
  absl::MutexLock lock(&table_mu_);
  return table_;
}

int Membership::num_ranks() const {
  const std::shared_ptr<const RankTable> t = table();
  return t == nullptr ? 0 : t->size();
}

WorkerIdentity Membership::who(int rank) const { return table()->ranks[static_cast<size_t>(rank)]; }

int Membership::RankOf(int node_rank, int local_rank) const {
  const std::shared_ptr<const RankTable> t = table();
  if (t == nullptr) return -1;
  for (int r = 0; r < t->size(); ++r) {
    const WorkerIdentity& w = t->ranks[static_cast<size_t>(r)];
    if (w.node_rank == node_rank && w.local_rank == local_rank) return r;
  }
  return -1;
}

absl::Status Membership::CheckWorker(int rank, int pid) const {
  const std::shared_ptr<const RankTable> t = table();
  if (t == nullptr) {
    return absl::FailedPreconditionError("the world is not complete yet: register first");
  }
  const int n = t->size();
  if (rank < 0 || rank >= n) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is outside 0..", n - 1));
  }
  const int owner = t->ranks[static_cast<size_t>(rank)].pid;
  if (owner != pid) {
    return absl::PermissionDeniedError(
        absl::StrCat("rank ", rank, " is registered to pid ", owner, ", not ", pid));
  }
  return absl::OkStatus();
}

RankAssignment Membership::AssignmentIn(const RankTable& t, int rank, const GenerationNote& note,
                                        bool state_from_peers) const {
  const WorkerIdentity& w = t.ranks[static_cast<size_t>(rank)];
  RankAssignment a;
  a.rank = rank;
  a.world_size = t.size();
  a.local_rank = w.local_rank;
  a.local_world_size = w.local_world_size;
  a.node_rank = w.node_rank;
  a.num_nodes = t.num_nodes;
  a.generation = slurm_generation_;
  a.membership_generation = t.generation;
  a.store_prefix = t.store_prefix;
  a.state_from_peers = state_from_peers;
  a.restarts = note.restarts;
  a.recovery_cause = note.cause;
  a.recovery_seconds = note.seconds;
  return a;
}

}  // namespace ddp
