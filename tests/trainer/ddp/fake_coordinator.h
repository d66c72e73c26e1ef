// An in-memory CoordinatorApi for tests: the c10d key-value part, with blocking get/wait and
// timeouts, shared by ranks-as-threads. The training RPCs are UNIMPLEMENTED.
//
// Thread safety: every method may be called from any thread.
#ifndef SLURM_DDP_TESTS_TRAINER_DDP_FAKE_COORDINATOR_H_
#define SLURM_DDP_TESTS_TRAINER_DDP_FAKE_COORDINATOR_H_

#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/coordinator_api.h"

namespace ddp::testing {

class FakeCoordinator : public CoordinatorApi {
 public:
  absl::StatusOr<RankAssignment> Register(const WorkerIdentity&, absl::Duration) override {
    return absl::UnimplementedError("fake");
  }
  absl::Status StoreSet(const std::string& key, const std::vector<uint8_t>& value) override {
    absl::MutexLock lock(&mu_);
    kv_[key] = value;
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<uint8_t>> StoreGet(const std::string& key,
                                                absl::Duration timeout) override {
    absl::MutexLock lock(&mu_);
    if (!AwaitLocked({key}, timeout)) return absl::DeadlineExceededError(key);
    return kv_[key];
  }
  absl::StatusOr<int64_t> StoreAdd(const std::string& key, int64_t delta) override {
    absl::MutexLock lock(&mu_);
    int64_t value = 0;
    auto it = kv_.find(key);
    if (it != kv_.end() &&
        !absl::SimpleAtoi(std::string(it->second.begin(), it->second.end()), &value)) {
      return absl::InvalidArgumentError("not an integer");
    }
    value += delta;
    const std::string text = absl::StrCat(value);
    kv_[key] = std::vector<uint8_t>(text.begin(), text.end());
    return value;
  }
  absl::StatusOr<std::vector<uint8_t>> StoreCompareSet(
      const std::string& key, const std::vector<uint8_t>& expected,
      const std::vector<uint8_t>& desired) override {
    absl::MutexLock lock(&mu_);
    auto it = kv_.find(key);
    if (it == kv_.end()) {
      if (!expected.empty()) return expected;
      kv_[key] = desired;
      return desired;
    }
    if (it->second == expected) it->second = desired;
    return it->second;
  }
  absl::StatusOr<bool> StoreDelete(const std::string& key) override {
    absl::MutexLock lock(&mu_);
    return kv_.erase(key) > 0;
  }
  absl::StatusOr<bool> StoreCheck(const std::vector<std::string>& keys) override {
    absl::MutexLock lock(&mu_);
    for (const auto& k : keys) {
      if (!kv_.count(k)) return false;
    }
    return true;
  }
  absl::StatusOr<int64_t> StoreNumKeys() override {
    absl::MutexLock lock(&mu_);
    return static_cast<int64_t>(kv_.size());
  }
  absl::Status StoreWait(const std::vector<std::string>& keys, absl::Duration timeout) override {
    absl::MutexLock lock(&mu_);
    if (!AwaitLocked(keys, timeout)) return absl::DeadlineExceededError("wait");
    return absl::OkStatus();
  }
  absl::StatusOr<ShardAssignment> GetShard(const ShardRequest&) override {
    return absl::UnimplementedError("fake");
  }
  absl::StatusOr<HeartbeatReply> Heartbeat(const ProgressReport&) override {
    return absl::UnimplementedError("fake");
  }
  absl::Status CommitCheckpoint(const CommittedCheckpoint&) override {
    return absl::UnimplementedError("fake");
  }
  absl::Status ReportDone(const absl::Status&) override { return absl::OkStatus(); }
  absl::StatusOr<RankAssignment> Rejoin(const RejoinRequest&, absl::Duration) override {
    return absl::UnimplementedError("fake");
  }
  absl::StatusOr<LostDecision> ReportLost(const LostWorker&) override {
    return absl::UnimplementedError("fake");
  }

 private:
  bool AwaitLocked(const std::vector<std::string>& keys, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto all_present = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const auto& k : keys) {
        if (!kv_.count(k)) return false;
      }
      return true;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&all_present), timeout);
  }

  absl::Mutex mu_;
  std::map<std::string, std::vector<uint8_t>> kv_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp::testing

#endif  // SLURM_DDP_TESTS_TRAINER_DDP_FAKE_COORDINATOR_H_
