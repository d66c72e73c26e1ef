#include "coordinator/kv_store.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ddp {

void KvStore::Run(std::vector<Completion>& completions) {
  for (Completion& c : completions) c();
}

bool KvStore::AllExistLocked(const std::vector<std::string>& keys) const {
  for (const std::string& k : keys) {
    if (data_.find(k) == data_.end()) return false;
  }
  return true;
}

KvStore::Completion KvStore::CompleteLocked(uint64_t id, absl::Status status) {
  auto it = waiters_.find(id);
  Waiter w = std::move(it->second);
  waiters_.erase(it);
  if (w.get_done) {
    absl::StatusOr<std::string> result =
        status.ok() ? absl::StatusOr<std::string>(data_[w.keys[0]]) : status;
    return [done = std::move(w.get_done), r = std::move(result)]() mutable { done(std::move(r)); };
  }
  return [done = std::move(w.wait_done), status]() { done(status); };
}

void KvStore::WakeLocked(const std::string& key, std::vector<Completion>* out) {
  auto it = waiters_by_key_.find(key);
  if (it == waiters_by_key_.end()) return;
  std::vector<uint64_t> ids = std::move(it->second);
  waiters_by_key_.erase(it);
  for (uint64_t id : ids) {
    auto w = waiters_.find(id);
    if (w == waiters_.end()) continue;  // already completed or expired
    if (AllExistLocked(w->second.keys)) out->push_back(CompleteLocked(id, absl::OkStatus()));
  }
}

void KvStore::Set(const std::string& key, std::string value) {
  std::vector<Completion> done;
  {
    absl::MutexLock lock(&mu_);
    data_[key] = std::move(value);
    WakeLocked(key, &done);
  }
  Run(done);
}

void KvStore::Get(const std::string& key, absl::Time deadline, GetCallback done) {
  std::string value;
  {
    absl::MutexLock lock(&mu_);
    auto it = data_.find(key);
    if (it == data_.end()) {
      uint64_t id = next_waiter_id_++;
      waiters_[id] = Waiter{{key}, deadline, std::move(done), nullptr};
      waiters_by_key_[key].push_back(id);
      return;
    }
    value = it->second;
  }
  done(std::move(value));
}

void KvStore::Wait(std::vector<std::string> keys, absl::Time deadline, WaitCallback done) {
  {
    absl::MutexLock lock(&mu_);
    if (!AllExistLocked(keys)) {
      uint64_t id = next_waiter_id_++;
      for (const std::string& k : keys) {
        if (data_.find(k) == data_.end()) waiters_by_key_[k].push_back(id);
      }
      waiters_[id] = Waiter{std::move(keys), deadline, nullptr, std::move(done)};
      return;
    }
  }
  done(absl::OkStatus());
}

absl::StatusOr<int64_t> KvStore::Add(const std::string& key, int64_t delta,
                                     const std::string& request_id) {
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
    sum = current + delta;
    data_[key] = absl::StrCat(sum);
    if (!request_id.empty()) {
      add_results_[request_id] = sum;
      add_order_.push_back(request_id);
      if (add_order_.size() > kRememberedAdds) {
        add_results_.erase(add_order_.front());
        add_order_.pop_front();
      }
    }
    WakeLocked(key, &done);
  }
  Run(done);
  return sum;
}

std::string KvStore::CompareSet(const std::string& key, const std::string& expected,
                                std::string desired) {
  std::vector<Completion> done;
  std::string now;
  {
    absl::MutexLock lock(&mu_);
    auto it = data_.find(key);
    if (it == data_.end()) {
      if (!expected.empty()) return expected;  // c10d: absent key + non-empty expected
      data_[key] = desired;
      now = std::move(desired);
      WakeLocked(key, &done);
    } else if (it->second == expected) {
      it->second = std::move(desired);
      now = it->second;
    } else {
      return it->second;
    }
  }
  Run(done);
  return now;
}

bool KvStore::Delete(const std::string& key) {
  absl::MutexLock lock(&mu_);
  return data_.erase(key) > 0;
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

void KvStore::ExpireWaiters(absl::Time now) {
  std::vector<Completion> done;
  {
    absl::MutexLock lock(&mu_);
    std::vector<uint64_t> expired;
    for (const auto& [id, w] : waiters_) {
      if (w.deadline <= now) expired.push_back(id);
    }
    for (uint64_t id : expired) {
      std::vector<std::string> missing;
      for (const std::string& k : waiters_[id].keys) {
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
    std::vector<uint64_t> ids;
    for (const auto& entry : waiters_) ids.push_back(entry.first);
    for (uint64_t id : ids) done.push_back(CompleteLocked(id, status));
    waiters_by_key_.clear();
  }
  Run(done);
}

}  // namespace ddp
