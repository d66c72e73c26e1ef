// Who is in the job, generation by generation (proto/coordinator.proto, RECOVERY): registration
// slots keyed by launch place (node_rank, local_rank); the barrier that answers every member
// once a generation is complete; the deterministic rank table of each generation (ordered by
// node, then local rank); vacant slots that a replacement takes; and who is missing.
//
// A generation is complete when every slot is occupied and its occupant has joined that
// generation: by Register (a new process: generation 0, or a replacement in a vacant slot) or by
// Rejoin (a survivor of the previous generation). Complete() then publishes the generation's
// RankTable and answers every queued callback with its place in it. Later changes (a spare that
// takes another node's slot, a smaller world) only change which slots a generation has.
//
// Thread safety: everything but the published table runs under the owner's lock (Job). The
// table is published through an internal lock as an immutable snapshot: table(), CheckWorker(),
// RankOf() and Describe() may be called from any thread without the owner's lock.
#ifndef SLURM_DDP_COORDINATOR_JOB_MEMBERSHIP_H_
#define SLURM_DDP_COORDINATOR_JOB_MEMBERSHIP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/coordinator_api.h"
#include "coordinator/job/completions.h"

namespace ddp {

// One generation's ranks: immutable once published.
struct RankTable {
  int64_t generation = 0;  // membership generation
  std::string store_prefix;
  int num_nodes = 0;
  std::vector<WorkerIdentity> ranks;  // index = rank
  int size() const { return static_cast<int>(ranks.size()); }
};

// What the owner adds to each member's answer when a generation completes.
struct GenerationNote {
  int restarts = 0;
  FailureCause cause;  // why it was formed (empty for the first)
  double seconds = 0;  // from the loss to its completion
};

class Membership {
 public:
  using RegisterCallback = std::function<void(absl::StatusOr<RankAssignment>)>;

  // An empty `nonce` skips the staleness check. `slurm_generation` names the store prefixes.
  Membership(int world_size, std::string nonce, int64_t slurm_generation);
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  struct JoinResult {
    bool new_slot = false;    // `who` took a free or vacant slot (a registration event)
    bool world_full = false;  // ... and the generation being formed is complete: Complete()
  };
  // Register: joins `who` (already validated) to the generation being formed, in a new slot
  // (before the first generation), a vacant one (`replacing` true in the result's event), or its
  // own slot again (a retry from the same host and pid). `refusal`, when not OK, is the job's
  // reason to refuse (it failed). On success `done` is queued until the generation is complete,
  // or scheduled at once for a retry whose generation is already complete. On error `done` is
  // untouched and the caller replies.
  absl::StatusOr<JoinResult> Join(const WorkerIdentity& who, RegisterCallback& done,
                                  const absl::Status& refusal, Completions* out);
  // Rejoin: the member at `rank` of the current table (pid already checked) joins the next
  // generation with its committed step; `done` is queued. Also accepted before a recovery began
  // (the owner then waits for one). Returns whether the next generation is now complete.
  // On error `done` is untouched and the caller replies.
  absl::StatusOr<bool> Rejoin(int rank, int64_t committed_step, RegisterCallback& done);
  // Starts forming the next generation (no-op while one is being formed).
  void BeginNext();
  bool forming_next() const { return forming_ > current_; }
  // The generation being formed (the current one when none is).
  int64_t forming() const { return forming_; }
  // The last complete generation; -1 before the first.
  int64_t current() const { return current_; }
  // Frees the slot of `rank` (of the current table) for a replacement; its queued callbacks get
  // `error`. `fate` says how its worker ended, for the deadline's message.
  void Vacate(int rank, const std::string& fate, const absl::Status& error, Completions* out);
  // A process that never registered died in the vacant slot (node_rank, local_rank).
  void NoteFailedStart(int node_rank, int local_rank, const std::string& fate);
  // The task of node `node_rank` saw process `pid` of slot (node_rank, local_rank) die. A
  // Register or Rejoin of that pid that comes later (it was on its way through the node's relay
  // when the process died, while the report went straight to the coordinator) is refused
  // instead of taking the slot for a dead process. Kept until the next generation is complete.
  void NoteDead(int node_rank, int local_rank, int pid);
  // Every slot occupied and joined to the generation being formed.
  bool GenerationComplete() const;
  // Publishes the generation being formed and answers every queued callback with its place.
  // Returns the ranks whose slot was vacated since the previous generation.
  std::vector<int> Complete(const GenerationNote& note, Completions* out);
  // A restarted coordinator (coordinator/job/journal.h): `table` is the current, complete
  // generation, its ranks the occupants of their slots (the world is its size: a job that
  // shrank stays shrunk). Call once, on a fresh object.
  void Restore(const RankTable& table);
  // Answers every queued callback with `error` (the job failed).
  void FailWaiters(const absl::Status& error, Completions* out);

  int world_size() const { return world_size_; }
  int registered() const;  // occupied slots
  int num_nodes() const { return num_nodes_; }
  // The occupants of the slots in (node_rank, local_rank) order.
  std::vector<WorkerIdentity> Registered() const;
  // The worker registered at (node_rank, local_rank) (the last one, if vacant), or nullptr.
  const WorkerIdentity* Find(int node_rank, int local_rank) const;
  bool vacant(int node_rank, int local_rank) const;
  // The number of slots node `node_rank` holds (0: not one of the job's nodes).
  int SlotsOnNode(int node_rank) const;
  // The nodes every slot of which is vacant, in order.
  std::vector<int> VacantNodes() const;
  // "node 1 (host n1, ranks 2,3)" in the current table.
  std::string DescribeNode(int node_rank) const;
  // The nodes the slots are on.
  int NodesInSlots() const;
  // Shrinking: drops every slot of `node_rank` (all vacant) from the generation being formed; the
  // world is that much smaller from its completion on. Returns the slots dropped.
  int RemoveNode(int node_rank);
  // "2 of 4 workers registered; missing node 1 (h1) local ranks 0,1" (or a coarser form when
  // the layout cannot be inferred).
  std::string MissingWorkers() const;
  // The slots of the generation being formed that are not in yet: "rank 2 (node 0 local rank 2,
  // replacement not registered; its start exited with code 2)".
  std::string MissingMembers() const;
  // "worker (host h, node 1, local rank 0, pid 7)": a worker without a rank yet.
  static std::string DescribeWorker(const WorkerIdentity& who);

  // --- the published table (any thread) ------------------------------------------------------
  bool world_complete() const { return complete_.load(std::memory_order_acquire); }
  std::shared_ptr<const RankTable> table() const;
  int num_ranks() const;  // 0 until complete
  WorkerIdentity who(int rank) const;
  // The rank at (node_rank, local_rank) in the current table, or -1.
  int RankOf(int node_rank, int local_rank) const;
  // OK when the world is complete, `rank` is in range and registered to `pid`.
  absl::Status CheckWorker(int rank, int pid) const;
  // "rank 3 (host h, node 1, local rank 1, pid 13)"
  std::string Describe(int rank) const;
  // One line per rank, "rank 0 = node 0 local 0 (host h, pid 7)", for the log.
  std::vector<std::string> RankTableLines() const;

 private:
  struct Slot {
    WorkerIdentity who;           // the occupant (the last one while vacant)
    bool vacant = false;          // its worker was lost; a replacement may take it
    bool vacated = false;         // vacated since the current generation (revived at completion)
    int64_t joined = -1;          // the generation the occupant has joined
    int64_t committed_step = -1;  // from Rejoin; -1 for a new process
    std::string fate;             // how the slot's last worker (or failed start) ended
    std::vector<int> dead_pids;   // NoteDead since the last complete generation
    std::vector<RegisterCallback> waiting;
  };
  using Key = std::pair<int, int>;  // (node_rank, local_rank)

  RankAssignment AssignmentIn(const RankTable& table, int rank, const GenerationNote& note,
                              bool state_from_peers) const;
  // Every change of a slot's vacancy or joined generation goes through Set, which keeps vacant_
  // and ready_ in step; Recount after forming_ changes.
  bool Ready(const Slot& slot) const { return !slot.vacant && slot.joined == forming_; }
  // FAILED_PRECONDITION when `pid` died in `slot` (NoteDead), else OK.
  static absl::Status CheckNotDead(const Slot& slot, int pid, const char* call);
  void Set(Slot& slot, bool vacant, int64_t joined);
  void Recount();
  static std::string DescribeIn(const RankTable& table, int rank);

  int world_size_;  // the slots a complete generation has (smaller after RemoveNode)
  const std::string nonce_;
  const int64_t slurm_generation_;
  std::map<Key, Slot> slots_;  // ordered: ranks follow map order
  int vacant_ = 0;             // slots_ with vacant set (registered() is O(1))
  // slots_ that are Ready: occupied and joined to forming_ (GenerationComplete is O(1); it runs
  // on every Register and Rejoin, and a scan made a 16,384-rank re-formation quadratic).
  int ready_ = 0;
  int num_nodes_ = 0;
  int64_t current_ = -1;
  int64_t forming_ = 0;

  mutable absl::Mutex table_mu_;
  std::shared_ptr<const RankTable> table_ ABSL_GUARDED_BY(table_mu_);
  std::atomic<bool> complete_{false};
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_MEMBERSHIP_H_
