#include "coordinator/kv_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ddp {

KvStore::KvStore(KvLimits limits) : limits_(limits) {}

void KvStore::Run(std::vector<Completion>& completions) {
  for (Completion& c : completions) c();
}

absl::Status KvStore::CheckKey(const std::string& key) const {
  if (key.empty() || key.size() > limits_.max_key_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("store key of ", key.size(),
                                                   " bytes is outside the limit 1..",
                                                   limits_.max_key_bytes, " (max_key_bytes)"));
  }
  return absl::OkStatus();
}

absl::Status KvStore::CheckRoomLocked(const std::string& key, size_t value_bytes) const {
  if (value_bytes > limits_.max_value_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("store value of ", value_bytes,
                                                   " bytes exceeds the limit of ",
                                                   limits_.max_value_bytes, " (max_value_bytes)"));
  }
  auto it = data_.find(key);
  size_t held = total_bytes_;
  if (it == data_.end()) {
    if (data_.size() >= limits_.max_keys) {
      return absl::ResourceExhaustedError(
          absl::StrCat("store is full: it holds ", data_.size(), " keys, the limit (max_keys)"));
    }
    held += key.size();
  } else {
    held -= it->second.size();
  }
  if (held + value_bytes > limits_.max_total_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "store is full: ", total_bytes_, " bytes held, this value of ", value_bytes,
        " bytes would pass the limit of ", limits_.max_total_bytes, " (max_total_bytes)"));
  }
  return absl::OkStatus();
}

void KvStore::PutLocked(const std::string& key, std::string value, std::vector<Completion>* out) {
  auto [it, inserted] = data_.try_emplace(key);
  if (inserted) {
    total_bytes_ += key.size();
  } else {
    total_bytes_ -= it->second.size();
  }
  total_bytes_ += value.size();
  it->second = std::move(value);
  if (inserted) WakeLocked(key, out);
}

absl::Status KvStore::CheckWaiterRoomLocked(size_t key_bytes) const {
  if (key_bytes > limits_.max_wait_key_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("store wait on ", key_bytes, " bytes of keys exceeds the limit of ",
                     limits_.max_wait_key_bytes, " (max_wait_key_bytes)"));
  }
  if (waiters_.size() >= limits_.max_waiters) {
    return absl::ResourceExhaustedError(
        absl::StrCat("store has ", waiters_.size(), " waiting calls, the limit (max_waiters)"));
  }
  if (waiter_key_bytes_ + key_bytes > limits_.max_waiter_key_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "store waiters hold ", waiter_key_bytes_, " bytes of keys; this wait's ", key_bytes,
        " would pass the limit of ", limits_.max_waiter_key_bytes, " (max_waiter_key_bytes)"));
  }
  return absl::OkStatus();
}

bool KvStore::AllExistLocked(const std::vector<std::string>& keys) const {
  for (const std::string& k : keys) {
    if (data_.find(k) == data_.end()) return false;
  }
  return true;
}

size_t KvStore::IndexMissingLocked(WaiterId id, const Waiter& w) {
  size_t missing = 0;
  for (const std::string& k : w.keys) {
    if (data_.find(k) != data_.end()) continue;
    if (waiters_by_key_[k].insert(id).second) ++missing;  // a repeated key counts once
  }
  return missing;
}

KvStore::WaiterId KvStore::ParkLocked(Waiter w) {
  const WaiterId id = next_waiter_id_++;
  w.missing = IndexMissingLocked(id, w);
  waiter_key_bytes_ += w.key_bytes;
  deadlines_.emplace(w.deadline, id);
  waiters_.emplace(id, std::move(w));
  return id;
}

KvStore::Completion KvStore::CompleteLocked(WaiterId id, absl::Status status) {
  auto it = waiters_.find(id);
  Waiter w = std::move(it->second);
  waiters_.erase(it);
  deadlines_.erase({w.deadline, id});
  waiter_key_bytes_ -= w.key_bytes;
  // A waiter ended before all its keys appeared (expired, cancelled) leaves the lists of the
  // keys it still misses, so nothing is left behind.
  if (w.missing > 0) {
    for (const std::string& k : w.keys) {
      auto by_key = waiters_by_key_.find(k);
      if (by_key == waiters_by_key_.end()) continue;
      by_key->second.erase(id);
      if (by_key->second.empty()) waiters_by_key_.erase(by_key);
    }
  }
  if (w.get_done) {
    absl::StatusOr<std::string> result =
        status.ok() ? absl::StatusOr<std::string>(data_.find(w.keys[0])->second) : status;
    return [done = std::move(w.get_done), r = std::move(result)]() mutable { done(std::move(r)); };
  }
  return [done = std::move(w.wait_done), status]() { done(status); };
}

void KvStore::WakeLocked(const std::string& key, std::vector<Completion>* out) {
  auto node = waiters_by_key_.extract(key);  // `key` exists now: nobody misses it any more
  if (node.empty()) return;
  for (WaiterId id : node.mapped()) {
    auto it = waiters_.find(id);
    if (it == waiters_.end()) continue;
    Waiter& w = it->second;
    if (--w.missing > 0) continue;
    // The last missing key: unless a key it saw appear was deleted since, the waiter is done.
    // (A re-index costs one pass over its keys, once per such deletion.)
    w.missing = IndexMissingLocked(id, w);
    if (w.missing == 0) out->push_back(CompleteLocked(id, absl::OkStatus()));
  }
}

absl::Status KvStore::Set(const std::string& key, std::string value) {
  std::vector<Completion> done;
  {
    absl::Status st = CheckKey(key);
    if (!st.ok()) return st;
    absl::MutexLock lock(&mu_);
    st = CheckRoomLocked(key, value.size());
    if (!st.ok()) return st;
    PutLocked(key, std::move(value), &done);
  }
  Run(done);
  return absl::OkStatus();
}

KvStore::WaiterId KvStore::Get(const std::string& key, absl::Time deadline, GetCallback done) {
  const absl::Status valid = CheckKey(key);
  absl::StatusOr<std::string> result = absl::UnknownError("unset");
  if (!valid.ok()) {
    result = valid;
  } else {
    absl::MutexLock lock(&mu_);
    auto it = data_.find(key);
    if (it != data_.end()) {
      result = it->second;
    } else if (const absl::Status* closed = ClosedLocked(key)) {
      result = *closed;
    } else {
      absl::Status room = CheckWaiterRoomLocked(key.size());
      if (room.ok()) {
        Waiter w;
        w.keys = {key};
        w.deadline = deadline;
        w.key_bytes = key.size();
        w.get_done = std::move(done);
        return ParkLocked(std::move(w));
      }
      result = room;
    }
  }
  done(std::move(result));
  return kNotParked;
}

KvStore::WaiterId KvStore::Wait(std::vector<std::string> keys, absl::Time deadline,
                                WaitCallback done) {
  absl::Status st = keys.empty() ? absl::InvalidArgumentError("store Wait needs at least one key")
                                 : absl::OkStatus();
  size_t key_bytes = 0;
  for (const std::string& k : keys) {
    if (st.ok()) st = CheckKey(k);
    key_bytes += k.size();
  }
  if (st.ok()) {
    absl::MutexLock lock(&mu_);
    if (!AllExistLocked(keys)) {
      const absl::Status* closed = nullptr;
      for (const std::string& k : keys) {
        if (closed == nullptr && data_.count(k) == 0) closed = ClosedLocked(k);
      }
      st = closed != nullptr ? *closed : CheckWaiterRoomLocked(key_bytes);
      if (st.ok()) {
        Waiter w;
        w.keys = std::move(keys);
        w.deadline = deadline;
        w.key_bytes = key_bytes;
        w.wait_done = std::move(done);
        return ParkLocked(std::move(w));
      }
    }
  }
  done(st);
  return kNotParked;
}

absl::StatusOr<int64_t> KvStore::Add(const std::string& key, int64_t delta,
                                     const std::string& request_id) {
  if (absl::Status st = CheckKey(key); !st.ok()) return st;
  if (request_id.size() > kMaxRequestIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("store Add request_id of ", request_id.size(),
                                                   " bytes exceeds the limit of ",
                                                   kMaxRequestIdBytes));
  }
  std::vector<Completion> done;
  int64_t sum = 0;
  {
    absl::MutexLock lock(&mu_);
    if (!request_id.empty()) {
      auto seen = add_results_.find(request_id);
      if (seen != add_results_.end()) return seen->second;  // a retry: already added
    }
    auto it = data_.find(key);
    int64_t current = 0;
    if (it != data_.end() && !absl::SimpleAtoi(it->second, &current)) {
      return absl::InvalidArgumentError(
          absl::StrCat("store key '", key, "' does not hold an integer"));
    }
    if (__builtin_add_overflow(current, delta, &sum)) {
      return absl::InvalidArgumentError(
          absl::StrCat("store Add on key '", key, "' overflows a 64-bit integer"));
    }
    std::string text = absl::StrCat(sum);
    if (absl::Status st = CheckRoomLocked(key, text.size()); !st.ok()) return st;
    PutLocked(key, std::move(text), &done);
    if (!request_id.empty()) {
      add_results_[request_id] = sum;
      add_order_.push_back(request_id);
      if (add_order_.size() > kRememberedAdds) {
        add_results_.erase(add_order_.front());
        add_order_.pop_front();
      }
    }
  }
  Run(done);
  return sum;
}

absl::StatusOr<std::string> KvStore::CompareSet(const std::string& key, const std::string& expected,
                                                std::string desired) {
  if (absl::Status st = CheckKey(key); !st.ok()) return st;
  std::vector<Completion> done;
  std::string now;
  {
    absl::MutexLock lock(&mu_);
    auto it = data_.find(key);
    if (it == data_.end() ? !expected.empty() : it->second != expected) {
      // c10d: an absent key with a non-empty `expected` answers `expected`.
      return it == data_.end() ? expected : it->second;
    }
    if (absl::Status st = CheckRoomLocked(key, desired.size()); !st.ok()) return st;
    now = desired;
    PutLocked(key, std::move(desired), &done);
  }
  Run(done);
  return now;
}

bool KvStore::Delete(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = data_.find(key);
  if (it == data_.end()) return false;
  total_bytes_ -= it->first.size() + it->second.size();
  data_.erase(it);
  return true;
}

bool KvStore::Check(const std::vector<std::string>& keys) const {
  absl::ReaderMutexLock lock(&mu_);
  return AllExistLocked(keys);
}

int64_t KvStore::NumKeys() const {
  absl::ReaderMutexLock lock(&mu_);
  return static_cast<int64_t>(data_.size());
}

size_t KvStore::NumWaiters() const {
  absl::ReaderMutexLock lock(&mu_);
  return waiters_.size();
}

size_t KvStore::TotalBytes() const {
  absl::ReaderMutexLock lock(&mu_);
  return total_bytes_;
}

size_t KvStore::WaiterKeyBytes() const {
  absl::ReaderMutexLock lock(&mu_);
  return waiter_key_bytes_;
}

bool KvStore::Cancel(WaiterId id, const absl::Status& status) {
  Completion done;
  {
    absl::MutexLock lock(&mu_);
    if (waiters_.find(id) == waiters_.end()) return false;
    done = CompleteLocked(id, status);
  }
  done();
  return true;
}

void KvStore::ExpireWaiters(absl::Time now) {
  std::vector<Completion> done;
  {
    absl::MutexLock lock(&mu_);
    while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
      const WaiterId id = deadlines_.begin()->second;
      std::vector<std::string> missing;
      for (const std::string& k : waiters_.find(id)->second.keys) {
        if (data_.find(k) == data_.end()) missing.push_back(k);
      }
      done.push_back(CompleteLocked(
          id, absl::DeadlineExceededError(absl::StrCat("store: timed out waiting for key(s) ",
                                                       absl::StrJoin(missing, ", ")))));
    }
  }
  Run(done);
}

void KvStore::CancelAll(const absl::Status& status) {
  std::vector<Completion> done;
  {
    absl::MutexLock lock(&mu_);
    std::vector<WaiterId> ids;
    ids.reserve(waiters_.size());
    for (const auto& entry : waiters_) ids.push_back(entry.first);
    for (WaiterId id : ids) done.push_back(CompleteLocked(id, status));
  }
  Run(done);
}

const absl::Status* KvStore::ClosedLocked(const std::string& key) const {
  for (const auto& [prefix, status] : closed_) {
    if (absl::StartsWith(key, prefix)) return &status;
  }
  return nullptr;
}

size_t KvStore::ClosePrefix(const std::string& prefix, const absl::Status& status) {
  if (prefix.empty()) return 0;
  std::vector<Completion> done;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& closed : closed_) {
      if (closed.first == prefix) return 0;
    }
    closed_.emplace_back(prefix, status);
    if (closed_.size() > kMaxClosedPrefixes) closed_.pop_front();
    // Every waiter still missing a key under `prefix` is listed under that key.
    absl::flat_hash_set<WaiterId> ids;
    for (const auto& [key, waiting] : waiters_by_key_) {
      if (absl::StartsWith(key, prefix)) ids.insert(waiting.begin(), waiting.end());
    }
    for (WaiterId id : ids) done.push_back(CompleteLocked(id, status));
  }
  Run(done);
  return done.size();
}

}  // namespace ddp
