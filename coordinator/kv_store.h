// The c10d key-value store the workers bootstrap their process group through (semantics of
// c10d::Store / TCPStore). Blocking operations (Get, Wait) take a callback instead of blocking a
// thread: the callback runs at once when the keys exist, else later from Set/Add/CompareSet (the
// key appeared), from ExpireWaiters (DEADLINE_EXCEEDED naming the missing keys) or from
// CancelAll (shutdown) or ClosePrefix (a generation's group that can no longer form). Callbacks
// always run without the store's lock held.
//
// Bounded (KvLimits): key size, value size and the key bytes of one Get or Wait
// (INVALID_ARGUMENT), number of keys, bytes held (keys + values), parked waiters and the key bytes
// they hold together (RESOURCE_EXHAUSTED). Every error names the limit, and a refused call
// changes nothing.
//
// Waiters are indexed by the keys they still miss, each with a count of them: a key that
// appears wakes exactly the waiters it completes, in time linear in the waiters on that key (no
// rescans of every waiter's key list, no per-waiter scans of shared lists), and deadlines are
// kept in order, so a tick expires only what is due. A parked call whose client went away is
// ended at once through Cancel (its waiter id, from Get or Wait). The defaults fit what c10d needs:
// NCCL stores a 128-byte unique id per process group; Gloo's TCP rendezvous stores, per rank, its
// host name, one socket address and 8 bytes per peer (512 KiB at 65536 ranks); barriers and
// counters are small.
//
// Thread safety: every method is thread-safe.
#ifndef SLURM_DDP_COORDINATOR_KV_STORE_H_
#define SLURM_DDP_COORDINATOR_KV_STORE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ddp {

struct KvLimits {
  size_t max_key_bytes = 4096;
  size_t max_value_bytes = size_t{1} << 20;
  size_t max_keys = size_t{1} << 20;
  size_t max_total_bytes = size_t{1} << 30;  // keys + values held
  size_t max_waiters = size_t{1} << 18;      // parked Get / Wait calls
  // The keys of one Get or Wait, in bytes, and of every parked waiter together.
  size_t max_wait_key_bytes = size_t{1} << 20;
  size_t max_waiter_key_bytes = size_t{256} << 20;
};

class KvStore {
 public:
  using GetCallback = std::function<void(absl::StatusOr<std::string>)>;
  using WaitCallback = std::function<void(absl::Status)>;
  // A parked waiter, for Cancel; kNotParked when the call was answered at once.
  using WaiterId = uint64_t;
  static constexpr WaiterId kNotParked = 0;

  explicit KvStore(KvLimits limits = KvLimits());
  KvStore(const KvStore&) = delete;
  KvStore& operator=(const KvStore&) = delete;

  absl::Status Set(const std::string& key, std::string value);
  // Calls `done` with the value once `key` exists, or DEADLINE_EXCEEDED at `deadline`. Returns
  // the waiter's id when it parked (`done` runs later), else kNotParked (`done` already ran).
  WaiterId Get(const std::string& key, absl::Time deadline, GetCallback done);
  // INVALID_ARGUMENT when the stored value is not a decimal integer or the sum overflows. A
  // non-empty `request_id` seen before (among the last kRememberedAdds) returns that call's sum
  // and adds nothing: a client retrying after a lost reply must not count twice.
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta,
                              const std::string& request_id = "");
  static constexpr size_t kRememberedAdds = 65536;
  static constexpr size_t kMaxRequestIdBytes = 64;
  // Sets `desired` if the value equals `expected` (or the key is absent and `expected` is
  // empty); returns the value now stored.
  absl::StatusOr<std::string> CompareSet(const std::string& key, const std::string& expected,
                                         std::string desired);
  bool Delete(const std::string& key);
  bool Check(const std::vector<std::string>& keys) const;
  int64_t NumKeys() const;
  // Calls `done` with OK once all `keys` exist, or DEADLINE_EXCEEDED at `deadline`. Returns as
  // Get does.
  WaiterId Wait(std::vector<std::string> keys, absl::Time deadline, WaitCallback done);

  // Ends the parked waiter `id` with `status` now (its caller went away); false when it is no
  // longer parked (answered, expired, or never parked).
  bool Cancel(WaiterId id, const absl::Status& status);
  // Fails every waiter whose deadline is at or before `now`.
  void ExpireWaiters(absl::Time now);
  // Fails every waiter with `status` (shutdown).
  void CancelAll(const absl::Status& status);
  // Closes the non-empty `prefix` (the keys of a membership generation whose process group can
  // no longer form, e.g. "gen0/m3/"): every parked waiter that misses a key under it ends now
  // with `status`, and a later Get or Wait that would park on such a key ends at once with it.
  // Keys under it can still be set and read. The last kMaxClosedPrefixes prefixes stay closed
  // (the oldest is forgotten first); closing one again changes nothing. Returns how many
  // waiters it ended.
  size_t ClosePrefix(const std::string& prefix, const absl::Status& status);
  static constexpr size_t kMaxClosedPrefixes = 64;
  size_t NumWaiters() const;
  // Bytes of the keys parked waiters hold.
  size_t WaiterKeyBytes() const;
  // Bytes of keys and values held.
  size_t TotalBytes() const;
  const KvLimits& limits() const { return limits_; }

 private:
  struct Waiter {
    std::vector<std::string> keys;
    absl::Time deadline;
    size_t key_bytes = 0;    // counted in waiter_key_bytes_
    size_t missing = 0;      // keys under which waiters_by_key_ lists this waiter
    GetCallback get_done;    // set for Get
    WaitCallback wait_done;  // set for Wait
  };
  using Completion = std::function<void()>;

  absl::Status CheckKey(const std::string& key) const;
  // OK when `key` may hold `value_bytes` (a new key counts against max_keys).
  absl::Status CheckRoomLocked(const std::string& key, size_t value_bytes) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Stores `value` under `key`, keeping the byte count, and wakes its waiters.
  void PutLocked(const std::string& key, std::string value, std::vector<Completion>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The per-call key bound (INVALID_ARGUMENT), then room for one more waiter holding
  // `key_bytes` (RESOURCE_EXHAUSTED).
  absl::Status CheckWaiterRoomLocked(size_t key_bytes) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Parks a waiter on the keys of `w` that are absent; returns its id.
  WaiterId ParkLocked(Waiter w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Indexes waiter `id` under each of its keys that is absent; returns how many.
  size_t IndexMissingLocked(WaiterId id, const Waiter& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds completions for the waiters on `key` (which just appeared) whose keys all exist now.
  void WakeLocked(const std::string& key, std::vector<Completion>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AllExistLocked(const std::vector<std::string>& keys) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  Completion CompleteLocked(WaiterId id, absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The status of the closed prefix `key` is under; null when it is under none.
  const absl::Status* ClosedLocked(const std::string& key) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  static void Run(std::vector<Completion>& completions);

  const KvLimits limits_;
  mutable absl::Mutex mu_;
  std::unordered_map<std::string, std::string> data_ ABSL_GUARDED_BY(mu_);
  size_t total_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<WaiterId, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  // Each absent key a waiter waits for, with the waiters that still miss it.
  absl::flat_hash_map<std::string, absl::flat_hash_set<WaiterId>> waiters_by_key_
      ABSL_GUARDED_BY(mu_);
  std::set<std::pair<absl::Time, WaiterId>> deadlines_ ABSL_GUARDED_BY(mu_);
  size_t waiter_key_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  WaiterId next_waiter_id_ ABSL_GUARDED_BY(mu_) = kNotParked + 1;
  // Results of recent Adds by request id, oldest first in add_order_.
  std::unordered_map<std::string, int64_t> add_results_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> add_order_ ABSL_GUARDED_BY(mu_);
  // Closed prefixes with their status, oldest first (ClosePrefix).
  std::deque<std::pair<std::string, absl::Status>> closed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_KV_STORE_H_
