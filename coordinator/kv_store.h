// The c10d key-value store the workers bootstrap their process group through (semantics of
// c10d::Store / TCPStore). Blocking operations (Get, Wait) take a callback instead of blocking a
// thread: the callback runs at once when the keys exist, else later from Set/Add/CompareSet (the
// key appeared), from ExpireWaiters (DEADLINE_EXCEEDED naming the missing keys) or from
// CancelAll (shutdown). Callbacks always run without the store's lock held.
//
// Bounded (KvLimits): key size and value size (INVALID_ARGUMENT), number of keys, bytes held
// (keys + values) and parked waiters (RESOURCE_EXHAUSTED). Every error names the limit, and a
// refused call changes nothing. The defaults fit what c10d needs: NCCL stores a 128-byte unique
// id per process group; Gloo's TCP rendezvous stores, per rank, its host name, one socket
// address and 8 bytes per peer (512 KiB at 65536 ranks); barriers and counters are small.
//
// Thread safety: every method is thread-safe.
#ifndef SLURM_DDP_COORDINATOR_KV_STORE_H_
#define SLURM_DDP_COORDINATOR_KV_STORE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
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
};

class KvStore {
 public:
  using GetCallback = std::function<void(absl::StatusOr<std::string>)>;
  using WaitCallback = std::function<void(absl::Status)>;

  explicit KvStore(KvLimits limits = KvLimits());
  KvStore(const KvStore&) = delete;
  KvStore& operator=(const KvStore&) = delete;

  absl::Status Set(const std::string& key, std::string value);
  // Calls `done` with the value once `key` exists, or DEADLINE_EXCEEDED at `deadline`.
  void Get(const std::string& key, absl::Time deadline, GetCallback done);
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
  // Calls `done` with OK once all `keys` exist, or DEADLINE_EXCEEDED at `deadline`.
  void Wait(std::vector<std::string> keys, absl::Time deadline, WaitCallback done);

  // Fails every waiter whose deadline is at or before `now`.
  void ExpireWaiters(absl::Time now);
  // Fails every waiter with `status` (shutdown).
  void CancelAll(const absl::Status& status);
  size_t NumWaiters() const;
  // Bytes of keys and values held.
  size_t TotalBytes() const;
  const KvLimits& limits() const { return limits_; }

 private:
  struct Waiter {
    std::vector<std::string> keys;
    absl::Time deadline;
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
  absl::Status CheckWaiterRoomLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Adds completions for the waiters on `key` whose keys all exist now.
  void WakeLocked(const std::string& key, std::vector<Completion>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AllExistLocked(const std::vector<std::string>& keys) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  Completion CompleteLocked(uint64_t id, absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Run(std::vector<Completion>& completions);

  const KvLimits limits_;
  mutable absl::Mutex mu_;
  std::unordered_map<std::string, std::string> data_ ABSL_GUARDED_BY(mu_);
  size_t total_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::string, std::vector<uint64_t>> waiters_by_key_ ABSL_GUARDED_BY(mu_);
  uint64_t next_waiter_id_ ABSL_GUARDED_BY(mu_) = 0;
  // Results of recent Adds by request id, oldest first in add_order_.
  std::unordered_map<std::string, int64_t> add_results_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> add_order_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_KV_STORE_H_
